"""The compiled methods of ``@dataclass`` classes, kept across processes.

``@dataclass`` writes each method it adds to a class (``__init__``, ``__repr__``, ``__eq__``,
a frozen class's ``__setattr__`` and ``__delattr__``, ``__hash__``, ...) as Python source text
and compiles it with ``exec``: ~0.1 ms a method, and a ``simllm`` process creates ~160
dataclasses while it starts (Hydra's config schemas, polars', simllm's specs and generated
schemas, the launcher plugins' configs): ~530 methods, ~0.05 CPU-s of every process, ``--help``
included. The text of a method depends only on its class's fields and options, so the same texts
come back in every process.

``install()`` gives the ``dataclasses`` module an ``exec`` of its own (``_exec``) that compiles
each text once and keeps the code object in a file of engine.persist's cache folder, one file
per top-level package of the class's module (``dataclass-code-<package>-<interpreter
tag>.marshal``, read with ``marshal`` as a ``.pyc`` file is, on the first method of that
package; entries are merged into it when the process exits): a text met before runs from the
code object read back (~3 ms to read the ~530 of a run), and a process reads only the files of
the packages it loads (a tracked run's MLflow, SQLAlchemy and alembic add ~900 methods that the
other processes do not read). Running the code compiled from a text is what ``exec``
of the text does: the same text, the same file name ``<string>``, no ``__future__`` flags
inherited (dataclasses.py has none: checked), the same globals and locals; so every class and
method is the one ``exec`` of the text would have made. The file is used only by the
interpreter that wrote it (its version, bytecode magic number and optimisation level).
Applied only where dataclasses' source has the one ``exec`` call this relies on (``_EXEC_LINE``)
and no other; ``SIMLLM_PERSIST=0`` leaves dataclasses as they are (nothing read or written).
"""

import dataclasses
import marshal
import os
import sys
from types import CodeType

from engine.persist import ENABLE_ENV, StampedMap, cache_dir

#: The call of dataclasses' ``_create_fn`` this relies on: the method's text, the class's
#: module globals and a fresh namespace (the same in Python 3.11 and 3.12).
_EXEC_LINE = "exec(txt, globals, ns)"
#: Bumped when what the file holds changes meaning.
FORMAT = 1


def _head() -> tuple:
    from importlib.util import MAGIC_NUMBER

    return (FORMAT, sys.version, MAGIC_NUMBER, sys.flags.optimize)


class CodeMap(StampedMap):
    """Method text -> its code object (engine.persist.StampedMap, marshal format): the newest
    ``max_entries`` kept."""

    binary = True

    def __init__(self, name: str = "dataclass-code", max_entries: int = 2048):
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


#: top-level package -> its CodeMap (made on the package's first method).
_CODES: dict = {}
_builtin_exec = exec


def _codes(globals) -> CodeMap:
    """The CodeMap of the package whose module's globals these are ("_" where unnamed)."""
    pkg = str(globals.get("__name__") or "").partition(".")[0]
    if not pkg.isidentifier():
        pkg = "_"
    m = _CODES.get(pkg)
    if m is None:
        m = _CODES[pkg] = CodeMap(f"dataclass-code-{pkg}")
    return m


def _exec(source, globals=None, locals=None, /):
    """``exec`` as dataclasses calls it, with the code of a text read back from ``_CODES`` or
    compiled once (module docstring). Globals and locals left out are the caller's, as the
    builtin takes them from the frame that calls it."""
    if globals is None:
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    elif locals is None:
        locals = globals
    if type(source) is str and isinstance(globals, dict):
        codes = _codes(globals)
        code = codes.get(source)
        if type(code) is not CodeType:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            codes.put(source, code)
        source = code
    return _builtin_exec(source, globals, locals)


_exec._simllm = True


def applies() -> bool:
    """Does dataclasses compile its methods with the one ``exec`` call this relies on, with no
    ``__future__`` import whose flags a text compiled there would inherit?"""
    try:
        with open(dataclasses.__file__, encoding="utf-8") as f:
            src = f.read()
    except (OSError, TypeError, AttributeError):
        return False
    return src.count("exec(") == 1 and _EXEC_LINE in src and "from __future__" not in src


def install() -> None:
    """Give dataclasses ``_exec`` (module docstring), unless ``SIMLLM_PERSIST=0`` or its source
    is not the one this relies on. Idempotent."""
    if getattr(getattr(dataclasses, "exec", None), "_simllm", False):
        return
    if os.environ.get(ENABLE_ENV, "1") == "0" or not applies():
        return
    dataclasses.exec = _exec


def uninstall() -> None:
    """dataclasses' own ``exec`` again (tests)."""
    if getattr(getattr(dataclasses, "exec", None), "_simllm", False):
        del dataclasses.exec
