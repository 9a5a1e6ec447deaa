"""Which tool format a chat template speaks, read from the markers in its source."""
from __future__ import annotations

from ..template import ChatTemplate
from .base import ToolFormat
from .native import Hermes, Llama3, Mistral, MistralV11
from .textual import Gemma, Generic, Phi4, SmolLM3


def tool_format_for(template: ChatTemplate) -> ToolFormat:
    src = template.source
    if "[TOOL_CALLS]" in src:
        return MistralV11(template) if "[ARGS]" in src else Mistral(template)
    if "<|tool_call|>" in src or ("<|tool|>" in src and "<|/tool|>" in src):
        return Phi4(template)
    if "xml_tools" in src or ("SmolLM" in src and "/no_think" in src):
        return SmolLM3(template)
    if "<tool_call>" in src:
        return Hermes(template)
    if "<|python_tag|>" in src or ("<|start_header_id|>" in src and "tools" in src and '"parameters"' in src):
        return Llama3(template)
    if "<start_of_turn>" in src:
        return Gemma(template)
    return Generic(template)
