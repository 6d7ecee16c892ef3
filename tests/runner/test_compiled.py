"""runner.compiled: the methods of dataclasses made with the kept code objects are the ones
dataclasses' own ``exec`` makes (compared in the same test with the builtin: same code, names,
defaults and behaviour), and the regular expressions built from the kept arguments equal
Python's own compile of the same pattern (pattern equality compares the matcher's code; groups
and matches compared too); a second process's read-back compiles and parses nothing; a pattern
whose parse warns still warns each time; the patches are left off where the patched source is not
the one they rely on or ``SIMLLM_PERSIST=0``; ``source_of`` reads what inspect.getsource reads."""

import dataclasses
import sys
import types
from dataclasses import InitVar, field, make_dataclass

import pytest

import re
import warnings

import runner.compiled as dcc


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
    was = getattr(dataclasses, "exec", None), re._compiler.compile
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
    if was[0] is not None:
        dataclasses.exec = was[0]
    re._compiler.compile = was[1]


def test_methods_equal_the_builtin_execs_and_read_back_compiles_nothing(codes, monkeypatch):
    ref = _variants()                        # dataclasses' own exec
    first = codes()
    dcc.install()
    assert getattr(dataclasses.exec, "_simllm", False)
    made = _variants()                       # compiled by _exec, kept
    # each distinct method text kept once (classes with the same fields share their texts), in
    # the file of the classes' module's package (make_dataclass: "types", a standard-library module)
    kept = {k: v for m in first.values() for k, v in m.new.items()}
    assert list(first) == [("dataclass-code", "stdlib")]
    assert len(kept) >= 10 and all(type(c) is types.CodeType for c in kept.values())
    for m in first.values():
        m.save()
        assert m.path.is_file() and "dataclass-code-stdlib-" in m.path.name

    second = codes()                         # a later process: the file read back
    compiled = []
    real = compile
    monkeypatch.setattr(dcc, "compile", lambda *a, **k: compiled.append(a) or real(*a, **k),
                        raising=False)
    again = _variants()
    assert compiled == [] and list(second) == [("dataclass-code", "stdlib")]
    assert second["dataclass-code", "stdlib"].new == {}
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


def test_re_patch_not_applied_where_re_compile_differs(codes, monkeypatch):
    codes()
    assert dcc.re_applies()

    def compile(p, flags=0):   # another re._compiler.compile than the one _re_compile repeats
        return p

    monkeypatch.setattr(dcc, "_RE_OWN", None)
    monkeypatch.setattr(dcc._re_compiler, "compile", compile)
    assert not dcc.re_applies()
    dcc.install()
    assert dcc._re_compiler.compile is compile


def test_a_foreign_or_corrupt_file_is_not_read(codes):
    codes()
    m = dcc.CodeMap("dataclass-code-stdlib")
    path = m._file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not marshal")
    assert m.get("x") is None
    import marshal

    path.write_bytes(marshal.dumps(((0, sys.version), {"def f(): pass": 1})))
    assert dcc.CodeMap("dataclass-code-stdlib").get("def f(): pass") is None


_PATTERNS = [
    (r"(?P<key>[A-Za-z_][\w.]*)\s*=\s*(?P<value>.*)$", 0),
    (r"^\s*-\s*experiment\s*:\s*(?!null\b)\S", re.M),
    (r"(\d+(?:\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*(TB|GB|MB)/s", re.I),
    (r"""
        (?<=[a-z])   # after a lower-case letter
        (?=[A-Z])    # before an upper-case one
     """, re.X),
    (r"caf\u00e9|na\u00efve|\N{GREEK SMALL LETTER ALPHA}+", re.I | re.U),
    (rb"(?P<head>[\x00-\x7f]{2})(?P=head)", 0),
    (r"a{2,5}?b|[^\]\-x]+", re.S),
]
_PATTERNS = [(p, int(f)) for p, f in _PATTERNS]    # as re._compile hands them on: plain ints


def test_patterns_equal_pythons_own_and_read_back_parses_nothing(codes, monkeypatch):
    first = codes()
    dcc.install()
    assert getattr(re._compiler.compile, "_simllm", False)
    own = dcc._RE_OWN
    for p, flags in _PATTERNS:
        got, ref = dcc._re_compile(p, flags), own(p, flags)
        assert got == ref and got.groupindex == ref.groupindex and got.groups == ref.groups
    kept = [k for m in first.values() for k in m.new]
    assert set(_PATTERNS) <= set(kept)
    for m in first.values():
        m.save()

    second = codes()                          # a later process: the files read back
    parsed = []
    real = re._parser.parse
    monkeypatch.setattr(dcc._re_parser, "parse", lambda *a: parsed.append(a) or real(*a))
    texts = ["key_1 = 4.8 TB/s", "  - experiment: jalapeno\n", "2e3 gb/s", "aB", "CAF\u00c9 \u03b1\u03b1",
             "xx-]b aab"]
    built = [dcc._re_compile(p, flags) for p, flags in _PATTERNS]
    assert parsed == []                       # every one from the kept arguments
    for (p, flags), got in zip(_PATTERNS, built):
        ref = own(p, flags)
        assert got == ref and got.groupindex == ref.groupindex and got.flags == ref.flags
        for t in texts:
            t = t.encode() if isinstance(p, bytes) else t
            a, b = got.search(t), ref.search(t)
            assert (a and (a.span(), a.groups(), a.groupdict())) == (b and (b.span(), b.groups(), b.groupdict()))
    assert all(not m.new for m in second.values())


def test_patterns_that_may_warn_or_debug_are_compiled_every_time(codes):
    maps = codes()
    dcc.install()
    for _ in range(2):
        with pytest.warns(FutureWarning, match="Possible nested set"):
            dcc._re_compile("[[a-z]", 0)
        with pytest.warns(FutureWarning, match="Possible set difference"):
            dcc._re_compile("[a-z--0-9]", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dcc._re_compile("[a-z]-[0-9]", 0)         # no set operation: kept
    kept = [k for m in maps.values() for k in m.new]
    assert ("[a-z]-[0-9]", 0) in kept and ("[[a-z]", 0) not in kept and ("[a-z--0-9]", 0) not in kept
    with pytest.raises(re.error):                  # an invalid pattern fails as Python's own
        dcc._re_compile("(unclosed", 0)


def test_source_of_equals_inspect_getsource():
    """source_of (the guards' source checks, by indentation, without inspect's module search
    and tokenizer) gives inspect.getsource's text: Hydra's run_job (a signature over several
    lines: what hydra_fast.lean_task_copy checks), re's compile, OmegaConf's node copies (methods:
    what hydra_fast.fast_value_node_copy checks), Hydra's get_help, a decorated function here;
    None for what has no code."""
    import inspect

    import hydra._internal.hydra as hh
    import hydra.core.utils as hcu
    import omegaconf.nodes as nodes

    own = [getattr(f, "_hydra", f) for f in (nodes.AnyNode.__deepcopy__, nodes.BooleanNode.__deepcopy__)]
    for f in (hcu.run_job, hcu._save_config, re._compiler.compile, _example_for_source_test,
              nodes.ValueNode._deepcopy_impl, getattr(hh.Hydra.get_help, "_hydra", hh.Hydra.get_help),
              *own):
        assert dcc.source_of(f) == inspect.getsource(f), f.__name__
    assert dcc.source_of(len) is None


def _decorated_for_source_test(f):
    return f


@_decorated_for_source_test
def _example_for_source_test(x):
    """A decorated function: its source starts at the decorator line, as inspect gives it."""
    if x:
        return 1
    return 2
