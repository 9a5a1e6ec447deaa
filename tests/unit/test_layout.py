"""The package's shape, drawn from core/'s source (imports inside functions included, `if TYPE_CHECKING:` blocks
left out, since they never run): no import cycle between modules, no package importing one above it in the
layering, no private name imported from another module, no hand-written module over 600 lines, and no class built
on another module's class unless that class is a contract made to be built on."""
from __future__ import annotations

import ast
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core"
PACKAGE = "llmchat"
MAX_LINES = 600
GENERATED = {"tokenizer/unicode_classes.py"}  # tools/build/gen_unicode_classes.py writes it

# Lowest first: a module imports its own package and the packages of lower layers only (a top-level module such
# as errors.py counts as a package of its own). The top package's __init__, which re-exports the public API, is
# the one module exempt, and it sits above everything.
LAYERS = (
    {"errors", "version", "paths"},
    {"gguf", "tokenizer", "grammar"},
    {"gpu"},
    {"models"},
    {"chat"},
    {"runtime"},
    {"serving"},
    {"hub"},
    {"protocol"},
    {"api"},
    {"browser", "server"},
    {"cli"},
    {"__main__"},
)
LAYER = {unit: i for i, units in enumerate(LAYERS) for unit in units} | {PACKAGE: len(LAYERS)}

# The classes of core/ that other modules' classes may subclass, each a contract whose subclasses fill in what it
# leaves open. Any other class is used by holding it (an `LLM` holds its `Runtime`) and calling its public methods.
CONTRACTS = {
    "llmchat.errors": "the error family: a refusal's class says its status and codes",
    "llmchat.gguf.config.ModelConfig": "each model file's own config",
    "llmchat.gguf.sources.Source": "a byte source: file, HTTP Range, memory, the browser's store",
    "llmchat.gpu.device.Device": "the device contract: native (wgpu-py) and browser (WebGPU)",
    "llmchat.gpu.device.Program": "a recorded program, as each device replays it",
    "llmchat.tokenizer.model.TokenizerModel": "a vocabulary's kind: BPE, SentencePiece, WordPiece, unigram",
    "llmchat.chat.tools.base.ToolFormat": "a template's tool-call convention",
    "llmchat.chat.tools.native.Hermes": "Hermes's convention, which SmolLM3's varies",
    "llmchat.grammar.schema_document.SchemaDocument": "a JSON Schema document walked by what converts it",
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str  # the core module whose code runs (a package's __init__ for names it re-exports)
    names: tuple[str, ...]  # the names taken from it (empty for `import x.y` and for a module imported by name)
    where: str  # file:line

    def describe(self) -> str:
        taken = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.importer} imports {self.target}{taken} at {self.where}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((PACKAGE, *parts))


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(CORE.rglob("*.py")) if "__pycache__" not in p.parts}


@functools.cache
def _tree(module: str) -> ast.Module:
    """`module`'s syntax tree, parsed once for every test that reads it."""
    path = _modules()[module]
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def _outside() -> tuple[str, ...]:
    """Packages installed inside llmchat from other folders (quant/, shaders/, web/): not part of core's graph."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return tuple(name for name in dirs if name != PACKAGE)


def _unit(module: str) -> str:
    """The package a module belongs to for the layering: `llmchat.gpu.ops` -> gpu, `llmchat.errors` -> errors."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _runs(node: ast.AST, typing: bool = False) -> list[ast.AST]:
    """The statements under `node` that can run: an `if TYPE_CHECKING:` body is only for type checkers (kept with
    `typing`: for a cycle it still ties the modules together)."""
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test) and not typing:
            out.extend(child.orelse)
        else:
            out.append(child)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_outside(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in _outside())


@functools.cache
def _imports(typing: bool = False) -> tuple[Import, ...]:
    """Every import of core/ by core/; with `typing`, those only type checkers run too."""
    modules = _modules()
    found: list[Import] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        stack = _runs(_tree(module), typing)
        while stack:
            node = stack.pop()
            stack.extend(_runs(node, typing))
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE and not _is_outside(alias.name):
                        found.append(Import(module, alias.name, (), where))
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, module, is_package)
                if base.split(".")[0] != PACKAGE or _is_outside(base):
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        found.append(Import(module, full, (), where))
                    elif not _is_outside(full):
                        found.append(Import(module, base, (alias.name,), where))
    return tuple(found)


def test_every_import_names_a_module_of_core():
    modules = _modules()
    missing = [f"{i.describe()}: no such module in core/" for i in _imports() if i.target not in modules]
    assert not missing, "\n".join(missing)


def test_no_import_cycles():
    """Not even through imports only type checkers run: a cycle there still means two modules need each other."""
    graph: dict[str, set[str]] = {}
    for i in _imports(typing=True):
        if i.target != i.importer:
            graph.setdefault(i.importer, set()).add(i.target)
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    report = []
    for cycle in cycles:
        inside = set(cycle)
        edges = [i.describe() for i in _imports(typing=True) if i.importer in inside and i.target in inside]
        report.append(f"import cycle among {', '.join(cycle)}:\n    " + "\n    ".join(sorted(set(edges))))
    assert not report, "\n".join(report)


def test_no_package_imports_one_above_it():
    problems = []
    for i in _imports():
        low, high = _unit(i.target), _unit(i.importer)
        if high == PACKAGE or low == high:
            continue
        for unit in (low, high):
            if unit not in LAYER:
                problems.append(f"{i.describe()}: package '{unit}' has no place in LAYERS")
        if low in LAYER and high in LAYER and LAYER[low] >= LAYER[high]:
            rule = "in the same layer as" if LAYER[low] == LAYER[high] else "in a layer above"
            problems.append(f"{i.describe()}: upward import ('{low}' is {rule} '{high}')")
    assert not problems, "\n".join(sorted(set(problems)))


def test_no_private_name_is_imported_from_another_module():
    crossed = [f"{i.describe()}: private name imported from another module"
               for i in _imports() if i.target != i.importer
               and any(n.startswith("_") and not n.startswith("__") for n in i.names)]
    assert not crossed, "\n".join(crossed)


def test_no_hand_written_module_is_over_600_lines():
    long = []
    for path in _modules().values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and path.relative_to(CORE).as_posix() not in GENERATED:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines, over {MAX_LINES}; split it by job")
    assert not long, "\n".join(long)


def test_a_class_subclasses_another_modules_class_only_when_that_class_is_a_contract():
    classes = {module: {n.name for n in ast.walk(_tree(module)) if isinstance(n, ast.ClassDef)}
               for module in _modules()}

    def home(module: str, name: str) -> str | None:
        """Where the class `name` taken from `module` is defined (a package may re-export it from a module below)."""
        for m in sorted(classes, key=len):
            if (m == module or m.startswith(module + ".")) and name in classes[m]:
                return f"{m}.{name}"
        return None

    built_on = []
    for module, path in _modules().items():
        is_package, taken = path.name == "__init__.py", {}
        tree = _tree(module)
        for node in ast.walk(tree):  # what each local name stands for: a class or a module of core
            if isinstance(node, ast.ImportFrom) and _absolute(node, module, is_package).startswith(PACKAGE + "."):
                base = _absolute(node, module, is_package)
                taken |= {alias.asname or alias.name: (base, alias.name) for alias in node.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for b in node.bases:
                if isinstance(b, ast.Name) and b.id in taken:
                    parent = home(*taken[b.id])
                elif isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name) and b.value.id in taken:
                    parent = home(".".join(taken[b.value.id]), b.attr)
                else:
                    continue
                if parent and parent.rsplit(".", 1)[0] != module and \
                        not any(parent == c or parent.startswith(c + ".") for c in CONTRACTS):
                    built_on.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} subclasses {parent}, "
                                    "which is not a contract (CONTRACTS): hold one and call its public methods")
    assert not built_on, "\n".join(built_on)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so a deep import chain cannot exhaust the stack."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components
