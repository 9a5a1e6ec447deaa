"""Grammar-constrained decoding: GBNF grammars matched over bytes, and the vocabulary tokens they allow."""
from .grammar import Grammar
from .matcher import Matcher
from .vocab import AllowedSet, VocabIndex

__all__ = ["AllowedSet", "Grammar", "Matcher", "VocabIndex"]
