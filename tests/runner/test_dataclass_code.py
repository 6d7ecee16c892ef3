"""runner.dataclass_code: the methods of dataclasses made with the kept code objects are the ones
dataclasses' own ``exec`` makes (compared in the same test with the builtin: same code, names,
defaults and behaviour), a second process's read-back compiles nothing, and the patch is left off
where dataclasses' source is not the one it relies on or ``SIMLLM_PERSIST=0``."""

import dataclasses
import sys
import types
from dataclasses import InitVar, field, make_dataclass

import pytest

import runner.dataclass_code as dcc


def _variants():
    """Dataclasses covering the generated methods: __init__ with defaults, factories, InitVar
    and kw_only fields; __repr__, __eq__, order, frozen __setattr__/__delattr__, __hash__,
    slots; the same fields under two class names."""
    out = []
    fields = [("a", int), ("b", str, field(default="x")), ("c", list, field(default_factory=list))]
    for name, kw in (("Plain", {}), ("Frozen", {"frozen": True}), ("Ordered", {"order": True}),
                     ("NoEq", {"eq": False}), ("Hashed", {"unsafe_hash": True}),
                     ("Slotted", {"slots": True}), ("KwOnly", {"kw_only": True}),
                     ("Plain2", {})):
        out.append(make_dataclass(name, fields, **kw))

    def post_init(self, scale):
        self.a = self.a * scale

    out.append(make_dataclass("WithInitVar", [("a", int), ("scale", InitVar[int], field(default=2))],
                              namespace={"__post_init__": post_init}))
    return out


def _methods(cls) -> dict:
    return {k: v for k, v in vars(cls).items() if isinstance(v, types.FunctionType)}


def _same(ref, got) -> None:
    rm, gm = _methods(ref), _methods(got)
    assert rm.keys() == gm.keys() and rm
    for k in rm:
        a, b = rm[k], gm[k]
        assert a.__code__ == b.__code__, (ref.__name__, k)
        assert (a.__code__.co_filename, a.__qualname__, a.__defaults__, a.__kwdefaults__) == \
               (b.__code__.co_filename, b.__qualname__, b.__defaults__, b.__kwdefaults__)
        assert a.__globals__ is b.__globals__
    assert ref.__doc__ == got.__doc__


@pytest.fixture
def codes(tmp_path, monkeypatch):
    """dataclasses with ``_exec`` on a fresh file in ``tmp_path``; ``codes()`` a new map on that
    file, as a new process reads it."""
    monkeypatch.setenv("SIMLLM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SIMLLM_PERSIST", raising=False)
    was = getattr(dataclasses, "exec", None)
    dcc.uninstall()

    made = []

    def new():
        maps: dict = {}
        monkeypatch.setattr(dcc, "_CODES", maps)
        made.append(maps)
        return maps

    yield new
    dcc.uninstall()
    for maps in made:            # nothing left to write into tmp_path when the process exits
        for m in maps.values():
            m.new = {}
    if was is not None:
        dataclasses.exec = was


def test_methods_equal_the_builtin_execs_and_read_back_compiles_nothing(codes, monkeypatch):
    ref = _variants()                        # dataclasses' own exec
    first = codes()
    dcc.install()
    assert getattr(dataclasses.exec, "_simllm", False)
    made = _variants()                       # compiled by _exec, kept
    # each distinct method text kept once (classes with the same fields share their texts), in
    # the file of the classes' module's package (make_dataclass: "types")
    kept = {k: v for m in first.values() for k, v in m.new.items()}
    assert list(first) == ["types"]
    assert len(kept) >= 10 and all(type(c) is types.CodeType for c in kept.values())
    for m in first.values():
        m.save()
        assert m.path.is_file() and "dataclass-code-types-" in m.path.name

    second = codes()                         # a later process: the file read back
    compiled = []
    real = compile
    monkeypatch.setattr(dcc, "compile", lambda *a, **k: compiled.append(a) or real(*a, **k),
                        raising=False)
    again = _variants()
    assert compiled == [] and list(second) == ["types"] and second["types"].new == {}
    for r, m, a in zip(ref, made, again):
        _same(r, m)
        _same(r, a)
    # behaviour, as a check of the methods themselves
    for r, a in zip(ref, again):
        kw = {"a": 3}
        x, y = r(**kw), a(**kw)
        assert repr(x).replace(r.__qualname__, "") == repr(y).replace(a.__qualname__, "")
        assert (x == r(**kw)) == (y == a(**kw))
    with pytest.raises(dataclasses.FrozenInstanceError):
        again[1](a=1).a = 2
    assert again[2](a=1) < again[2](a=2)
    assert hash(again[4](a=1, c=())) == hash(ref[4](a=1, c=()))   # the same tuple hashed
    assert again[-1](a=5).a == 10


def test_exec_takes_the_callers_globals_as_the_builtin_does(codes):
    codes()
    g = {"z": 4}
    ns_b, ns_c = {}, {}
    exec("y = z + 1", g, ns_b)                  # noqa: S102 - the builtin, the reference
    dcc._exec("y = z + 1", g, ns_c)
    assert ns_b == ns_c == {"y": 5}
    mine, builtin = {}, {}
    dcc._exec("w = __name__", None, mine)       # globals left out: the caller's (this module's)
    exec("w = __name__", None, builtin)         # noqa: S102
    assert mine == builtin == {"w": __name__}
    out = {}
    dcc._exec(compile("v = 7", "<t>", "exec"), {}, out)   # a code object runs as given
    assert out == {"v": 7}


def test_not_applied_where_dataclasses_source_differs_or_persist_is_off(codes, tmp_path, monkeypatch):
    codes()
    assert dcc.applies()
    other = tmp_path / "dataclasses.py"
    other.write_text("def f(txt):\n    exec(txt, globals, ns)\n    exec(txt)\n")
    monkeypatch.setattr(dataclasses, "__file__", str(other))
    assert not dcc.applies()
    dcc.install()
    assert not hasattr(dataclasses, "exec")
    monkeypatch.undo()
    monkeypatch.setenv("SIMLLM_PERSIST", "0")
    dcc.install()
    assert not hasattr(dataclasses, "exec")


def test_a_foreign_or_corrupt_file_is_not_read(codes):
    codes()
    m = dcc.CodeMap("dataclass-code-types")
    path = m._file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not marshal")
    assert m.get("x") is None
    import marshal

    path.write_bytes(marshal.dumps(((0, sys.version), {"def f(): pass": 1})))
    assert dcc.CodeMap("dataclass-code-types").get("def f(): pass") is None
