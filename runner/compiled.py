"""What Python compiles from text while a ``simllm`` process starts, kept across processes: the
methods ``@dataclass`` writes and the regular expressions modules compile at import.

* ``@dataclass`` writes each method it adds to a class (``__init__``, ``__repr__``, ``__eq__``,
  a frozen class's ``__setattr__`` and ``__delattr__``, ``__hash__``, ...) as Python source text
  and compiles it with ``exec``: ~0.1 ms a method, and a process creates ~160 dataclasses while
  it starts (Hydra's config schemas, polars', simllm's specs and generated schemas, the launcher
  plugins' configs): ~530 methods, ~0.05 CPU-s of every process, ``--help`` included. The text
  of a method depends only on its class's fields and options.
* ``re.compile`` parses a pattern and compiles it to the matcher's code in Python
  (``re._compiler.compile``: ~0.25 ms a pattern; ~90 patterns, ~0.02 CPU-s of a run); the code
  depends only on the pattern, its flags and the interpreter.

``install()`` gives the ``dataclasses`` module an ``exec`` of its own (``_exec``) that compiles
each text once and keeps the code object, and ``re._compiler`` a ``compile`` (``_re_compile``)
that keeps what it hands the matcher's constructor (``_sre.compile``: flags, code, groups) for
each pattern and flags, so a pattern met before is built from it without parsing. Both keep
their entries in files of engine.persist's cache folder, one file per kind and top-level
package of the module the class or pattern belongs to (the standard library's modules share one;
``<kind>-<package>-<interpreter tag>.marshal``, read with ``marshal`` as a ``.pyc`` file is, on the package's first use; entries
are merged into it when the process exits): a process reads only the files of the packages it
loads (a tracked run's MLflow, SQLAlchemy and pydantic add ~900 methods that other processes do
not read), ~3 ms for the ~620 entries of a run.

Nothing built differs: running the code compiled from a method's text is what ``exec`` of the
text does (the same text, file name ``<string>``, no ``__future__`` flags inherited --
dataclasses.py has none: checked -- and the same globals and locals), and a pattern is built by
the same ``_sre.compile`` call from the same arguments. A pattern whose parse could warn (a
possible set operation or nested set, a conditional group, a bytes pattern with non-ASCII
bytes: ``_quiet``) or that asks for ``re.DEBUG`` output is compiled as Python does every time,
so its warnings and output stay. The files are used only by the interpreter that wrote them
(its version, bytecode magic number and optimisation level). Each patch is applied only where
the patched module's source has what it relies on (``_EXEC_LINE``; ``_RE_LINES``);
``SIMLLM_PERSIST=0`` leaves both modules as they are (nothing read or written).
"""

import dataclasses
import marshal
import os
import sys
from re import _compiler as _re_compiler, _parser as _re_parser
from types import CodeType

from engine.persist import ENABLE_ENV, StampedMap, cache_dir

#: The call of dataclasses' ``_create_fn`` this relies on: the method's text, the class's
#: module globals and a fresh namespace (the same in Python 3.11 and 3.12).
_EXEC_LINE = "exec(txt, globals, ns)"
#: The lines of ``re._compiler.compile`` that ``_re_compile`` repeats (Python 3.11 and 3.12).
_RE_LINES = ("p = _parser.parse(p, flags)", "code = _code(p, flags)", "groupindex = p.state.groupdict",
             "indexgroup = [None] * p.state.groups", "indexgroup[i] = k", "return _sre.compile(",
             "pattern, flags | p.state.flags, code,", "p.state.groups-1,", "groupindex, tuple(indexgroup)")
#: Bumped when what a file holds changes meaning.
FORMAT = 1


def _head() -> tuple:
    from importlib.util import MAGIC_NUMBER

    return (FORMAT, sys.version, MAGIC_NUMBER, sys.flags.optimize)


class CodeMap(StampedMap):
    """Text -> what was compiled from it (engine.persist.StampedMap, marshal format): the newest
    ``max_entries`` kept."""

    binary = True

    def __init__(self, name: str, max_entries: int = 2048):
        super().__init__(name, max_entries)

    def _file(self):
        return cache_dir() / f"{self.name}-{sys.implementation.cache_tag}.marshal"

    def _read(self, f):
        data = marshal.loads(f.read())   # at once: marshal.load(f) reads a file piece by piece
        if not (isinstance(data, tuple) and len(data) == 2 and data[0] == _head()):
            return None
        return data[1]

    def _write(self, f, entries: dict) -> None:
        f.write(marshal.dumps((_head(), entries)))

    def _merged(self, old: dict, new: dict) -> dict:
        return dict(list({**old, **new}.items())[-self.max_entries:])


#: (kind, top-level package) -> its CodeMap (made on the package's first use).
_CODES: dict = {}


def _codes(kind: str, module_name) -> CodeMap:
    """The CodeMap of ``kind`` for the top-level package of ``module_name`` ("stdlib" for the
    standard library's, which every process loads alike; "_" where unnamed)."""
    pkg = str(module_name or "").partition(".")[0]
    if pkg in sys.stdlib_module_names:
        pkg = "stdlib"
    elif not pkg.isidentifier():
        pkg = "_"
    m = _CODES.get((kind, pkg))
    if m is None:
        m = _CODES[kind, pkg] = CodeMap(f"{kind}-{pkg}")
    return m


# ---------------------------------------------------------------------------- dataclass methods
_builtin_exec = exec


def _exec(source, globals=None, locals=None, /):
    """``exec`` as dataclasses calls it, with the code of a text read back or compiled once
    (module docstring). Globals and locals left out are the caller's, as the builtin takes them
    from the frame that calls it."""
    if globals is None:
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    elif locals is None:
        locals = globals
    if type(source) is str and isinstance(globals, dict):
        codes = _codes("dataclass-code", globals.get("__name__"))
        code = codes.get(source)
        if type(code) is not CodeType:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            codes.put(source, code)
        source = code
    return _builtin_exec(source, globals, locals)


_exec._simllm = True


def source_of(func) -> str | None:
    """The source text of a plain function, as ``inspect.getsource`` gives it (its decorators,
    its ``def`` and the lines indented under it, trailing blank lines left out), read from its
    code object's file and first line by indentation: ``inspect.getsource`` first maps every
    loaded module to its file to find the function's module and then runs the tokenizer (~5 ms
    of a process here). None where there is no code or the file cannot be read."""
    import linecache

    code = getattr(func, "__code__", None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    i = code.co_firstlineno - 1
    if not 0 <= i < len(lines):
        return None
    block = []
    while i < len(lines) and lines[i].lstrip().startswith("@"):   # decorators
        block.append(lines[i])
        i += 1
    if i >= len(lines):
        return None
    head = lines[i]
    indent = len(head) - len(head.lstrip())
    depth = 0
    while i < len(lines):        # the def line, and those of a signature that spans lines
        block.append(lines[i])
        depth += sum(lines[i].count(c) for c in "([{") - sum(lines[i].count(c) for c in ")]}")
        i += 1
        if depth <= 0:
            break
    for line in lines[i:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line)
    while block and not block[-1].strip():
        block.pop()
    return "".join(block)


def applies() -> bool:
    """Does dataclasses compile its methods with the one ``exec`` call this relies on, with no
    ``__future__`` import whose flags a text compiled there would inherit?"""
    try:
        with open(dataclasses.__file__, encoding="utf-8") as f:
            src = f.read()
    except (OSError, TypeError, AttributeError):
        return False
    return src.count("exec(") == 1 and _EXEC_LINE in src and "from __future__" not in src


# ---------------------------------------------------------------------------- regular expressions
#: Modules whose frames stand between a pattern's owner and ``_re_compile``.
_RE_MODULES = frozenset({"re", "re._compiler", "sre_compile", __name__})


def _owner() -> str:
    """The module that asked for the pattern: the first frame outside the re package."""
    f = sys._getframe(1)
    while f is not None and f.f_globals.get("__name__") in _RE_MODULES:
        f = f.f_back
    return f.f_globals.get("__name__") if f is not None else None


def _quiet(p) -> bool:
    """Can parsing ``p`` issue no warning? (re._parser warns on a set starting with "[", a
    doubled "-", "&", "~" or "|" inside a set, a conditional group's name, and a non-ASCII group
    name in a bytes pattern: none of those can occur without these substrings.)"""
    if type(p) is bytes:
        return p.isascii() and not any(s in p for s in (b"[[", b"--", b"&&", b"~~", b"||", b"(?("))
    return not any(s in p for s in ("[[", "--", "&&", "~~", "||", "(?("))


def _re_compile(p, flags=0):
    """``re._compiler.compile`` with the matcher's arguments of a pattern read back or computed
    once (module docstring); anything else (a parsed pattern, flags that are not a plain int,
    ``re.DEBUG``, a pattern whose parse may warn) is Python's own ``compile``."""
    if (type(p) not in (str, bytes) or type(flags) is not int or flags & _re_compiler.SRE_FLAG_DEBUG
            or not _quiet(p)):
        return _RE_OWN(p, flags)
    codes = _codes("regex-code", _owner())
    key = (p, flags)
    hit = codes.get(key)
    if not (type(hit) is tuple and len(hit) == 5):
        parsed = _re_parser.parse(p, flags)
        code = _re_compiler._code(parsed, flags)
        groupindex = parsed.state.groupdict
        indexgroup = [None] * parsed.state.groups
        for k, i in groupindex.items():
            indexgroup[i] = k
        # the code's opcodes are int subclasses (named constants): kept as the ints they are
        hit = (flags | parsed.state.flags, [int(c) for c in code], parsed.state.groups - 1,
               dict(groupindex), tuple(indexgroup))
        codes.put(key, hit)
    all_flags, code, groups, groupindex, indexgroup = hit
    return _re_compiler._sre.compile(p, all_flags, list(code), groups, dict(groupindex), indexgroup)


_re_compile._simllm = True
_RE_OWN = None


def re_applies() -> bool:
    """Is ``re._compiler.compile`` the function ``_re_compile`` repeats? (Read with
    ``source_of``, by indentation: the tokenizer compiles a large regular expression, which is
    kept too once this is installed.)"""
    src = source_of(_RE_OWN or _re_compiler.compile) or ""
    return all(line in src for line in _RE_LINES) and src.count("_sre.compile(") == 1


# ---------------------------------------------------------------------------- both
def install() -> None:
    """Give dataclasses ``_exec`` and re ``_re_compile`` (module docstring), each where its
    source is the one this relies on, unless ``SIMLLM_PERSIST=0``. Idempotent."""
    global _RE_OWN

    if os.environ.get(ENABLE_ENV, "1") == "0":
        return
    if not getattr(getattr(dataclasses, "exec", None), "_simllm", False) and applies():
        dataclasses.exec = _exec
    if not getattr(_re_compiler.compile, "_simllm", False) and re_applies():
        _RE_OWN = _re_compiler.compile
        _re_compiler.compile = _re_compile


def uninstall() -> None:
    """dataclasses' own ``exec`` and re's own ``compile`` again (tests)."""
    if getattr(getattr(dataclasses, "exec", None), "_simllm", False):
        del dataclasses.exec
    if getattr(_re_compiler.compile, "_simllm", False):
        _re_compiler.compile = _RE_OWN
