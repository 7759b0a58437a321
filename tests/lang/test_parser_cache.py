"""app/lang/syntax.py keeps the parser's LALR tables on disk (`build_parser`): a parser loaded from
them reads every pipeline as a freshly built one does, positions and error messages included, and a
missing, torn or unwritable cache only means building the tables again."""

from __future__ import annotations

from pathlib import Path

import pytest
from lark import Lark

from app.lang import syntax
from app.lang.errors import PipelineError

ROOT = Path(__file__).resolve().parents[2]
TEXTS = sorted(p for d in ("app", "tests", "bench") for p in (ROOT / d).rglob("*.pipe"))
BAD = ["agent p { mbarrier.arrive.b64 _, [full[0]; }", "barrier b = ;",
       "agent a { for (int i = 0; i < 3; ++i { } }", "param x = 1 in 1..;", "agent { }"]


def _tables(directory: Path) -> list[Path]:
    return sorted(directory.glob("grammar-*.lark"))


def test_a_loaded_parser_reads_every_pipeline_as_a_built_one(tmp_path):
    assert len(TEXTS) > 20
    built = syntax.build_parser(None)
    first = syntax.build_parser(tmp_path)
    [tables] = _tables(tmp_path)
    loaded = syntax.build_parser(tmp_path)
    assert _tables(tmp_path) == [tables] and not list(tmp_path.glob("*.tmp"))
    for path in TEXTS:
        text = path.read_text()
        want = syntax.ToAst().transform(built.parse(text))
        assert syntax.ToAst().transform(loaded.parse(text)) == want, path.name
        assert syntax.ToAst().transform(first.parse(text)) == want, path.name


def _message(parser, text: str, monkeypatch) -> str:
    monkeypatch.setattr(syntax, "_parser", lambda: parser)
    with pytest.raises(PipelineError) as err:
        syntax.parse(text)
    return str(err.value)


def test_a_loaded_parser_explains_errors_as_a_built_one(tmp_path, monkeypatch):
    built = syntax.build_parser(None)
    syntax.build_parser(tmp_path)
    loaded = syntax.build_parser(tmp_path)
    for text in BAD:
        assert _message(loaded, text, monkeypatch) == _message(built, text, monkeypatch)


def test_torn_tables_are_built_again(tmp_path):
    syntax.build_parser(tmp_path)
    [tables] = _tables(tmp_path)
    whole = tables.read_bytes()
    tables.write_bytes(whole[: len(whole) // 2])
    parser = syntax.build_parser(tmp_path)
    text = TEXTS[0].read_text()
    assert parser.parse(text) == syntax.build_parser(None).parse(text)
    with tables.open("rb") as f:  # written whole again
        assert Lark.load(f).parse(text) == parser.parse(text)


def test_an_unwritable_cache_is_no_cache(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    parser = syntax.build_parser(blocker / "cache")
    text = TEXTS[0].read_text()
    assert parser.parse(text) == syntax.build_parser(None).parse(text)


def test_the_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MBI_CACHE_DIR", str(tmp_path / "mine"))
    assert syntax.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("MBI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert syntax.cache_dir() == tmp_path / "mbarrier-inspector"
