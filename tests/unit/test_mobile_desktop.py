"""The app's desktop run on Linux, without building it: the requirements Briefcase picks per system in
mobile/pyproject.toml agree with each other and with the Debian packages mobile/README.md tells users to install,
and the bounded wait that keeps toga-gtk from hanging (seen with PyGObject 3.50, on Debian 12) ends."""
from __future__ import annotations

import re
import tomllib

from mobile_support import ROOT
from packaging.requirements import Requirement

from llmchat_app import gtk_compat

APP = tomllib.loads((ROOT / "mobile" / "pyproject.toml").read_text())["tool"]["briefcase"]["app"]["llmchat_app"]
DEBIAN = APP["linux"]["system"]["debian"]
BOOKWORM = DEBIAN["bookworm"]
README = (ROOT / "mobile" / "README.md").read_text()


def requirements(section: dict) -> dict[str, Requirement]:
    return {(r := Requirement(text)).name: r for text in section.get("requires", [])}


def test_debian_12_pins_a_toga_gtk_the_linux_range_admits_and_a_pygobject_that_builds_on_girepository_1():
    linux, bookworm = requirements(APP["linux"]), requirements(BOOKWORM)
    (pinned,) = [s.version for s in bookworm["toga-gtk"].specifier]
    assert [s.operator for s in bookworm["toga-gtk"].specifier] == ["=="]
    # Briefcase adds the bookworm requirements to the Linux ones: both must hold at once.
    assert linux["toga-gtk"].specifier.contains(pinned) and linux["toga-gtk"].specifier.contains("0.5.7")
    assert bookworm["pygobject"].specifier.contains("3.50.2")
    assert not bookworm["pygobject"].specifier.contains("3.51.0")  # 3.51 on: libgirepository-2.0 only
    assert "libgirepository1.0-dev" in BOOKWORM["system_requires"]
    assert "libgirepository-2.0-dev" in DEBIAN["system_requires"]
    assert f"toga-gtk {pinned}" in README and f"toga-gtk {pinned}" in gtk_compat.__doc__


def apt_line(system: str) -> set[str]:
    """The packages of the README's `sudo apt install` line under the `# <system>:` comment."""
    match = re.search(rf"^# {re.escape(system)}:\nsudo apt install ((?:.*\\\n)*.*)$", README, re.MULTILINE)
    assert match, f"no apt line for {system} in mobile/README.md"
    return set(match.group(1).replace("\\\n", " ").split())


def test_the_readmes_apt_lines_hold_what_briefcase_checks():
    # Briefcase checks python3-dev and build-essential itself and the venv module needs python3-venv; the rest is
    # the section's own packages.
    base = {"python3-venv", "python3-dev", "build-essential"}
    for system, section in [("Debian 12", BOOKWORM), ("Ubuntu 24.04, Debian 13", DEBIAN)]:
        wanted = base | set(section["system_requires"]) | set(section["system_runtime_requires"])
        assert apt_line(system) == wanted, system


def test_the_bounded_wait_leaves_other_backends_alone():
    assert gtk_compat.apply("toga_dummy") is False  # without importing gi or toga_gtk


class FakeGtk:
    def __init__(self, pending: float):
        self.pending, self.iterations = pending, 0

    def events_pending(self) -> bool:
        return self.iterations < self.pending

    def main_iteration_do(self, blocking: bool) -> None:
        assert blocking is False
        self.iterations += 1


def test_the_bounded_wait_ends_when_the_events_do_and_when_they_never_do():
    some = FakeGtk(pending=12)
    gtk_compat.bounded_flush(some)(object())
    assert some.iterations == 12
    endless = FakeGtk(pending=float("inf"))  # PyGObject 3.50: the asyncio source is pending again each time
    gtk_compat.bounded_flush(endless, limit=50)(object())
    assert endless.iterations == 50
