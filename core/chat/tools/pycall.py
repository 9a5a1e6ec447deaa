"""Python-style calls as Gemma writes them (`f(a=1, b="x")`): keyword arguments to a JSON-ready dict.

Read with the standard library's `ast` and a walk that accepts only literals, so no code runs. JSON's own
`true`/`false`/`null` are accepted next to Python's, since models mix them.
"""
from __future__ import annotations

import ast
from typing import Any

from .jsonscan import NotJSON

_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def python_call_arguments(source: str) -> dict[str, Any]:
    try:
        tree = ast.parse(source.strip(), mode="eval").body
    except SyntaxError as exc:
        raise NotJSON(f"not a Python call: {exc.msg}") from exc
    if not isinstance(tree, ast.Call) or tree.args:
        raise NotJSON("a call takes keyword arguments only")
    out = {}
    for keyword in tree.keywords:
        if keyword.arg is None:
            raise NotJSON("**kwargs is not a value")
        out[keyword.arg] = _literal(keyword.value)
    return out


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        keys = [_literal(key) for key in node.keys]
        if all(isinstance(key, str) for key in keys):
            return dict(zip(keys, (_literal(value) for value in node.values)))
    raise NotJSON(f"not a literal value: {ast.dump(node)[:60]}")
