"""Tokenizer: llama.cpp's ids on the real SmolLM2 vocabulary, special tokens, decoding and streaming,
SentencePiece vocabularies, merge order, and the Unicode tables behind the pre-tokenizers."""
from __future__ import annotations

import importlib.util
import json
import re
import unicodedata
from pathlib import Path

import pytest
from tokenizer_vocabs import train_byte_level, train_spm

from llmchat.tokenizer import unicode_classes
from llmchat.errors import TokenizerError
from llmchat.gguf.file import open_gguf
from llmchat.tokenizer.pretokenize import PATTERNS, SUPPORTED, PreTokenizer, expand, get_pre_tokenizer
from llmchat.tokenizer.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((ROOT / "tests/data/smollm2-135m-instruct-q4_1.json").read_text(encoding="utf-8"))
TEXTS = json.loads((ROOT / "tests/data/texts.json").read_text(encoding="utf-8"))
CORPUS = [TEXTS["perplexity_text"], *TEXTS["tokenize"], *TEXTS["prompts"]]


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Tokenizer:
    with open_gguf(smollm2_path) as model:
        return Tokenizer.from_metadata(model.metadata)


def byte_level_vocab(tokens: list[str], merges: list[str], pre: str = "gpt2",
                     types: dict[str, int] | None = None, **extra: object) -> dict[str, object]:
    """Hand-made byte-level metadata: every token NORMAL unless `types` says otherwise."""
    types = types or {}
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": [types.get(t, 1) for t in tokens], "tokenizer.ggml.merges": merges,
            **{f"tokenizer.ggml.{k}": v for k, v in extra.items()}}


# --------------------------------------------------------------------------------------- llama.cpp golden ids

@pytest.mark.parametrize("case", GOLDEN["tokenize"], ids=lambda c: repr(c["text"])[:40])
def test_plain_text_ids_match_llama_cpp(smollm2: Tokenizer, case: dict) -> None:
    assert smollm2.encode(case["text"]) == case["ids"]
    assert smollm2.decode(case["ids"]) == case["text"]


@pytest.mark.parametrize("case", GOLDEN["prompts"], ids=lambda c: repr(c["text"])[:40])
def test_prompt_ids_match_llama_cpp(smollm2: Tokenizer, case: dict) -> None:
    ids = smollm2.encode(case["text"], add_bos=smollm2.add_bos, parse_special=True)
    assert ids == case["ids"]
    assert smollm2.decode(ids) == case["text"]


def test_smollm2_special_tokens(smollm2: Tokenizer) -> None:
    assert GOLDEN["add_bos"] is smollm2.add_bos is False
    assert smollm2.vocab_size == 49152
    assert (smollm2.bos_id, smollm2.eos_id) == (1, 2)
    assert smollm2.token_text(1) == "<|im_start|>" and smollm2.token_text(2) == "<|im_end|>"
    # EOT is found by its spelling (the file names none); <|endoftext|> also ends generation, and so does
    # <reponame>, which llama.cpp takes for the FIM repository-name token.
    assert smollm2.eot_id == 2
    assert smollm2.eog_ids == {0, 2, 4}
    assert smollm2.token_id("Ġthe") == 260 and smollm2.token_id("no such token") is None


def test_control_tokens_are_text_unless_parse_special(smollm2: Tokenizer) -> None:
    text = "<|im_start|>user\nhi<|im_end|>"
    assert 1 not in smollm2.encode(text)
    assert smollm2.encode(text, parse_special=True) == [1, 4093, 198, 6004, 2]


def test_decode_skip_special(smollm2: Tokenizer) -> None:
    ids = smollm2.encode("<|im_start|>user\nhi<|im_end|>", parse_special=True)
    assert smollm2.decode(ids) == "<|im_start|>user\nhi<|im_end|>"
    assert smollm2.decode(ids, skip_special=True) == "user\nhi"
    assert smollm2.is_control(1) and not smollm2.is_control(4093)


def test_add_bos_and_eos(smollm2: Tokenizer) -> None:
    assert smollm2.encode("hi", add_bos=True, add_eos=True) == [1, 6004, 2]


def test_lone_surrogates_read_as_replacement_character(smollm2: Tokenizer) -> None:
    assert smollm2.encode("a\ud800b") == smollm2.encode("a\ufffdb")


def test_bad_token_id_is_refused(smollm2: Tokenizer) -> None:
    with pytest.raises(TokenizerError, match="outside the vocabulary"):
        smollm2.decode([49152])
    with pytest.raises(TokenizerError):
        smollm2.token_text(-1)


# --------------------------------------------------------------------------------------------------- streaming

@pytest.mark.parametrize("text", ["emoji 😀👍🏽🇫🇷 👨\u200d👩\u200d👧\u200d👦 done", "日本語のテキストです。", "한국어 문장입니다"])
def test_stream_decoder_emits_whole_characters_only(smollm2: Tokenizer, text: str) -> None:
    decoder = smollm2.stream_decoder()
    outputs = [decoder.feed(tid) for tid in smollm2.encode(text)]
    assert decoder.flush() == ""
    assert "".join(outputs) == text
    assert all("\ufffd" not in out for out in outputs)
    # These texts have characters spread over several byte-level tokens: some feeds must hold everything back.
    assert "" in outputs


def test_stream_decoder_flushes_an_incomplete_character(smollm2: Tokenizer) -> None:
    ids = smollm2.encode("😀")
    assert len(ids) > 1
    decoder = smollm2.stream_decoder()
    assert decoder.feed(ids[0]) == ""
    assert decoder.flush() == "\ufffd"
    assert smollm2.decode(ids[:1]) == "\ufffd"


def test_stream_decoder_skip_special(smollm2: Tokenizer) -> None:
    ids = smollm2.encode("<|im_start|>hi<|im_end|>", parse_special=True)
    decoder = smollm2.stream_decoder(skip_special=True)
    assert "".join(decoder.feed(tid) for tid in ids) + decoder.flush() == "hi"


# ---------------------------------------------------------------------------------------------- bad metadata

def test_unknown_pre_tokenizer_names_the_supported_ones() -> None:
    metadata = byte_level_vocab(["a"], [], pre="no-such-pre")
    with pytest.raises(TokenizerError, match="no-such-pre") as info:
        Tokenizer.from_metadata(metadata)
    for name in ("smollm", "llama3", "llama-bpe", "qwen2", "gpt2", "default", "deepseek-llm", "starcoder"):
        assert name in str(info.value)


@pytest.mark.parametrize(("change", "message"), [
    ({"tokenizer.ggml.model": "rwkv"}, "unsupported tokenizer.ggml.model"),
    ({"tokenizer.ggml.model": None}, "no tokenizer.ggml.model"),
    ({"tokenizer.ggml.tokens": []}, "empty"),
    ({"tokenizer.ggml.merges": None}, "merges is missing"),
    ({"tokenizer.ggml.token_type": [1, 1, 1]}, "token_type has 3 entries for 2 tokens"),
])
def test_broken_metadata_is_refused(change: dict, message: str) -> None:
    metadata = {**byte_level_vocab(["a", "b"], []), **change}
    metadata = {k: v for k, v in metadata.items() if v is not None}
    with pytest.raises(TokenizerError, match=message):
        Tokenizer.from_metadata(metadata)


def test_missing_pre_means_default() -> None:
    metadata = byte_level_vocab(["a", "1"], [])
    del metadata["tokenizer.ggml.pre"]
    assert Tokenizer.from_metadata(metadata).pre == "default"


# ------------------------------------------------------------------------------------------- merge semantics

def test_one_merge_at_a_time_in_rank_order() -> None:
    # "ab a" ranks before "a b": after the first "a b" merge, "ab"+"a" wins over the second "a b". Merging every
    # occurrence of the best pair per round (the original GPT-2 loop) would give ["ab", "ab"] instead.
    tokens = ["a", "b", "ab", "aba"]
    tok = Tokenizer.from_metadata(byte_level_vocab(tokens, ["ab a", "a b"]))
    assert [tok.token_text(i) for i in tok.encode("abab")] == ["aba", "b"]


def test_ignore_merges_takes_whole_words_for_llama3_only() -> None:
    tokens = ["a", "b", "c", "ab", "abc"]
    merges = ["a b"]  # "abc" cannot be reached by merging
    llama3 = Tokenizer.from_metadata(byte_level_vocab(tokens, merges, pre="llama3"))
    gpt2 = Tokenizer.from_metadata(byte_level_vocab(tokens, merges, pre="gpt2"))
    assert llama3.encode("abc") == [4]
    assert gpt2.encode("abc") == [3, 2]
    assert llama3.add_bos is True and gpt2.add_bos is False  # llama.cpp's defaults without add_bos_token


def test_byte_without_token_still_separates_its_neighbours(smollm2: Tokenizer) -> None:
    # SmolLM2 has no token for byte 0x06. llama.cpp keeps it as a symbol while merging, so "/" and "<" around it
    # do not merge into "/<" (HF, which drops unknown characters before merging, gives [31194]); it is then
    # dropped from the output.
    assert smollm2.encode("/\x06<") == [31, 44]
    assert smollm2.token_text(31194) == "/<"


def test_unmergeable_symbols_keep_only_ascii_tokens() -> None:
    # "é" is two bytes ("Ã©" in byte-level spelling) and neither byte is a token: llama.cpp drops them.
    tok = Tokenizer.from_metadata(byte_level_vocab(["a", "b"], []))
    assert tok.encode("aéb") == [0, 1]


# ------------------------------------------------------------------------------------------ special tokens

@pytest.fixture(scope="module")
def with_user_defined() -> Tokenizer:
    metadata, _ = train_byte_level(CORPUS, "gpt2", 400, user_defined=("<think>", "<think>x", "bcd", "ab"))
    return Tokenizer.from_metadata(metadata)


def test_user_defined_tokens_are_always_split_out(with_user_defined: Tokenizer) -> None:
    tok = with_user_defined
    think = tok.token_id("<think>")
    assert think in tok.encode("so <think> about it")
    assert tok.encode("<|endoftext|>").count(0) == 0
    assert tok.encode("<|endoftext|>", parse_special=True) == [0]
    assert tok.decode(tok.encode("so <think> about it"), skip_special=True) == "so <think> about it"


def test_special_tokens_longest_first(with_user_defined: Tokenizer) -> None:
    tok = with_user_defined
    assert tok.encode("<think>x") == [tok.token_id("<think>x")]
    # llama.cpp tries each special token in turn, longest first, over the whole text; so "bcd" is cut out of
    # "abcd" before "ab" is tried, although "ab" starts earlier.
    ids = tok.encode("abcd")
    assert tok.token_id("bcd") in ids and tok.token_id("ab") not in ids


def test_end_of_turn_spellings_become_control_and_end_generation() -> None:
    tokens = ["a", "<|endoftext|>", "<|im_end|>", "<|eot_id|>x"]
    tok = Tokenizer.from_metadata(byte_level_vocab(tokens, [], types={"<|im_end|>": 4}))
    assert tok.eot_id == 2  # <|im_end|> is preferred to <|endoftext|>
    assert tok.eog_ids == {1, 2}
    assert tok.is_control(2)  # typed USER_DEFINED in the file, CONTROL as in llama.cpp
    assert 2 not in tok.encode("a<|im_end|>")
    assert tok.encode("a<|im_end|>", parse_special=True) == [0, 2]


def test_phi3_special_tokens_swallow_following_whitespace() -> None:
    metadata = byte_level_vocab(["<s>", "<|user|>", "a", "Ċ", "Ġ"], [], types={"<s>": 3, "<|user|>": 3})
    phi3 = Tokenizer.from_metadata({**metadata, "general.name": "Phi-3 mini 4k instruct"})
    other = Tokenizer.from_metadata(metadata)
    assert phi3.encode("<|user|>\n a", parse_special=True) == [1, 2]
    assert phi3.encode("<s>\na", parse_special=True) == [0, 3, 2]  # <s> keeps what follows
    assert other.encode("<|user|>\n a", parse_special=True) == [1, 3, 4, 2]


# ------------------------------------------------------------------------------------ SentencePiece vocabulary

@pytest.fixture(scope="module")
def spm() -> Tokenizer:
    return Tokenizer.from_metadata(train_spm(TEXTS["perplexity_text"], 200, extra_chars="日"))


def test_spm_defaults(spm: Tokenizer) -> None:
    assert spm.add_bos is True and spm.add_space_prefix is True
    assert (spm.bos_id, spm.eos_id, spm.unk_id) == (1, 2, 0)
    assert spm.eog_ids == {2}


def test_spm_space_prefix_and_round_trip(spm: Tokenizer) -> None:
    ids = spm.encode("the lighthouse keeper")
    assert spm.token_text(ids[0]).startswith("\u2581")
    assert spm.decode(ids) == "the lighthouse keeper"
    assert spm.decode(spm.encode("  two  spaces ", add_bos=True), skip_special=True) == "  two  spaces "
    assert spm.decode(spm.encode("x", add_bos=True)) == "<s>x"
    assert spm.encode("") == []


def test_spm_byte_fallback(spm: Tokenizer) -> None:
    ids = spm.encode("日😀")
    pieces = [spm.token_text(i) for i in ids]
    assert pieces == ["\u2581", "日", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert spm.decode(ids) == "日😀"
    decoder = spm.stream_decoder()
    assert [decoder.feed(i) for i in ids] == [" ", "日", "", "", "", "😀"]


def test_spm_merges_by_score() -> None:
    # With "▁a" scoring above "ab", "▁ab" comes out as "▁a"+"b"; with the scores swapped, as "▁"+"ab".
    base = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁", "a", "b",
                                                                      "▁a", "ab"],
            "tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 1, 1, 1]}
    first = Tokenizer.from_metadata({**base, "tokenizer.ggml.scores": [0, 0, 0, -5, -5, -5, -1, -2]})
    second = Tokenizer.from_metadata({**base, "tokenizer.ggml.scores": [0, 0, 0, -5, -5, -5, -2, -1]})
    assert first.encode("ab") == [6, 5]
    assert second.encode("ab") == [3, 7]


def test_spm_space_prefix_after_special_tokens(spm: Tokenizer) -> None:
    ids = spm.encode("<s>the</s>the", parse_special=True)
    assert ids[0] == 1 and 2 in ids
    after = ids[ids.index(2) + 1:]
    assert after == spm.encode("the")  # a space is put in front of text after a special token too


def test_spm_without_space_prefix() -> None:
    metadata = {**train_spm(TEXTS["perplexity_text"], 100), "tokenizer.ggml.add_space_prefix": False}
    tok = Tokenizer.from_metadata(metadata)
    assert not tok.token_text(tok.encode("the")[0]).startswith("\u2581")
    assert tok.decode(tok.encode(" the")) == " the"


def test_spm_unknown_character_without_byte_tokens() -> None:
    metadata = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "▁", "a"],
                "tokenizer.ggml.token_type": [2, 3, 3, 1, 1], "tokenizer.ggml.scores": [0.0] * 5}
    assert Tokenizer.from_metadata(metadata).encode("aé") == [3, 4, 0, 0]  # one <unk> per byte of "é"


def test_spm_vocabulary_with_space_inside_pieces_is_merged_whole() -> None:
    # A piece with "▁" after another character lets merges cross a word start: the text is not cut there.
    glued = Tokenizer.from_metadata(train_spm(TEXTS["perplexity_text"], 200, extra_chars="Z", glue="Z\u2581"))
    assert glued.token_id("Z\u2581") in glued.encode("Z Z")


# ------------------------------------------------------------------------------------------ pre-tokenizers

def test_every_pre_tokenizer_compiles_and_covers_its_input() -> None:
    text = "Hello  world's 12345 café\u3000日本語!! \n\n x😀\U0001d7ce\ue000\r\n\t~"
    for name in SUPPORTED:
        pieces = get_pre_tokenizer(name).split(text)
        assert "".join(pieces) == text and all(pieces), name


@pytest.mark.parametrize("name", SUPPORTED)
def test_stand_ins_agree_with_full_ranges(name: str) -> None:
    # The fast path (characters beyond U+FFFF replaced by class stand-ins) must split exactly like matching
    # the full Unicode ranges; the text mixes such characters with the stand-ins' own code points.
    full = PreTokenizer(name, tuple(re.compile("(" + expand(p, False) + ")", re.ASCII) for p in PATTERNS[name]),
                        stand_ins=False)
    text = ("a\U00010400b 12\U0001d7ce3 \ue000x\ue001 \ue005\U000e0001y\U0001f600!! \U00020000\U00020001 "
            "\u0301\U0001d167 q\u3000\u00a0z \U0001f1eb\U0001f1f7 9\U00010107 ~\U0001d6c1")
    assert get_pre_tokenizer(name).split(text) == full.split(text)


def test_llama_cpp_quirks_are_kept() -> None:
    # Non-ASCII whitespace never matches a literal class member (deepseek-llm lists U+3000 as punctuation).
    assert get_pre_tokenizer("deepseek-llm").split("a\u3000\u3001") == ["a", "\u3000", "\u3001"]
    assert get_pre_tokenizer("deepseek-coder").split("\u4e00\u2000\u4e00") == ["\u4e00", "\u2000", "\u4e00"]
    # llama.cpp's ASCII symbol table has no "~".
    symbol = re.compile("[" + expand(r"\p{S}") + "]")
    assert [c for c in map(chr, range(128)) if symbol.match(c)] == list("$+<=>^`|")


@pytest.mark.parametrize(("key", "members"), [
    (r"\p{L}", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"),
    (r"\p{N}", "0123456789"),
    (r"\p{P}", "!\"#%&'()*,-./:;?@[\\]_{}"),
    (r"\p{M}", ""),
])
def test_ascii_members_of_classes(key: str, members: str) -> None:
    cls = re.compile("[" + expand(key) + "]")
    assert "".join(c for c in map(chr, range(128)) if cls.match(c)) == members


def test_unicode_tables_equal_unicodedata() -> None:
    # The tables are generated from a newer Unicode than some Pythons know; on those, the code points this Python
    # has assigned must still get exactly its classes (newer ones are only additions).
    spec = importlib.util.spec_from_file_location("gen_unicode_classes", ROOT / "tools/build/gen_unicode_classes.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    same_version = unicodedata.unidata_version == unicode_classes.UNICODE_VERSION
    assigned = None if same_version else [unicodedata.category(chr(cp)) != "Cn" for cp in range(0x110000)]
    for name, runs in generator.class_ranges().items():
        table = getattr(unicode_classes, name)
        if same_version:
            assert table == tuple(v for run in runs for v in run), name
            continue
        ours = {cp for first, last in zip(table[::2], table[1::2]) for cp in range(first, last + 1)
                if assigned[cp]}  # type: ignore[index]  # set when versions differ
        assert ours == {cp for first, last in runs for cp in range(first, last + 1)}, name
    assert unicode_classes.WHITESPACE == (0x9, 0xD, 0x20, 0x20, 0x85, 0x85, 0xA0, 0xA0, 0x1680, 0x1680,
                                          0x2000, 0x200A, 0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F,
                                          0x3000, 0x3000)


# ---------------------------------------------------------------------------------------------------- loading

def test_merges_are_ranked_by_first_occurrence() -> None:
    tokens = ["a", "b", "c", "ab", "bc"]
    tok = Tokenizer.from_metadata(byte_level_vocab(tokens, ["b c", "a b", "b c"]))
    assert tok.encode("abc") == [0, 4]  # "b c" ranks 0 even though it is listed again at 2


def test_repeated_and_empty_token_texts() -> None:
    tok = Tokenizer.from_metadata(byte_level_vocab(["a", "", "a"], []))
    assert tok.encode("a") == [2]  # the last id of a repeated text, as in llama.cpp
    assert tok.token_text(1) == "[EMPTY_1]"
