"""The one template engine: every line-oriented file a deploy writes is a Jinja2 template
rendered here, from the typed data the library builds.

Where a template is found (the first match wins):

1. **the site's own** ``templates/`` folder, beside its ``inventory/`` and ``group_data/``
   (found as group_data is: :func:`site_folders`): the same relative name there overrides
   gpuinfra's template. The top-level ``templates/`` of a checkout is that folder for the
   sites in ``inventory/`` (templates/README.md);
2. **a role's**: ``<role>/<target path>.j2`` is ``roles/<role>/templates/<target path>.j2``
   (``slurm/etc/slurm/slurm.conf.j2``);
3. **a shared one**, in this package's folder, named by its format: ``systemd/unit.j2`` (every
   systemd unit and drop-in gpuinfra writes).

Every template renders with ``StrictUndefined`` (a name the data does not have is an error,
never an empty string), XML templates (``*.xml.j2``) with autoescaping, and every other one
refusing a value with a line break (it would add lines, directives or commands to the file)
unless the data marks it as a :class:`gpuinfra.text.Block`. A rendered text is a
:class:`Rendered`: it remembers which template it came from, so a consumer that refuses a
file from a site's override names that template (gpuinfra_deploy/ops/checked.py).
"""

from __future__ import annotations

import difflib
import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import (
    BaseLoader,
    Environment,
    StrictUndefined,
    TemplateError,
    TemplateNotFound,
    TemplateSyntaxError,
)

from gpuinfra.errors import GpuinfraError
from gpuinfra.header import header
from gpuinfra.text import Block, FileText
from gpuinfra_deploy.run.knobs import role_names, roles_folder
from gpuinfra_deploy.templates import once

SHARED = Path(__file__).resolve().parent
SUFFIX = ".j2"
SITE_FOLDER = "templates"


class TemplateProblem(GpuinfraError):
    """A template that cannot be found, read, parsed or rendered, named with where it came
    from and what to do."""


class Rendered(str):
    """A file's text, and the template it came from.

    ``template``: its name (``slurm/etc/slurm/slurm.conf.j2``); ``origin``: the file read;
    ``override``: True when that file is the site's own (its ``templates/`` folder)."""

    template: str
    origin: Path
    override: bool

    def __new__(cls, text: str, template: str, origin: Path, override: bool) -> Rendered:
        made = super().__new__(cls, text)
        made.template, made.origin, made.override = template, origin, override
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        return (Rendered, (str(self), self.template, self.origin, self.override))

    @property
    def about(self) -> str:
        """Where the text came from, in words (for a refusal)."""
        if self.override:
            return f"the site's template {self.origin}"
        return f"gpuinfra's template {self.template}"


# ----------------------------------------------------------------------------- where they are

def site_folders(inventory: str | None = None, cwd: str | None = None) -> list[Path]:
    """The site's own template folders, in the order they are searched: ``templates/`` in the
    working directory, beside the inventory file and beside its folder (as pyinfra finds
    ``group_data/``): those that exist."""
    here = Path(cwd or os.getcwd()).resolve()
    candidates = [here / SITE_FOLDER]
    if inventory:
        file = Path(inventory).resolve()
        candidates += [file.parent / SITE_FOLDER, file.parent.parent / SITE_FOLDER]
    return [c for c in dict.fromkeys(candidates) if c.is_dir()]


_SITE: tuple[Path, ...] | None = None


def use_site(folders: Iterable[Path]) -> None:
    """The site template folders of this run (the spec gate, ``gpuinfra render``); until
    called, those of the working directory are used."""
    global _SITE
    _SITE = tuple(Path(f).resolve() for f in folders)


def current_site_folders() -> tuple[Path, ...]:
    return _SITE if _SITE is not None else tuple(site_folders())


def use_site_of(inventory: str, cwd: str | None = None) -> list[Path]:
    """The site template folders of ``inventory`` (:func:`site_folders`), judged
    (:func:`site_problems`: a TemplateProblem listing every problem) and used from now on."""
    folders = site_folders(inventory, cwd)
    problems = site_problems(folders)
    if problems:
        raise TemplateProblem("the site's own templates:\n" + "\n".join(
            f"  - {p}" for p in problems))
    use_site(folders)
    return folders


# The site's templates rendered in this process (their files): what a render reports.
_USED: set[Path] = set()


def overrides_used() -> list[Path]:
    """The site's own templates rendered so far in this process."""
    return sorted(_USED)


def overrides_unused(folders: Sequence[Path]) -> list[Path]:
    """The site's own templates no file rendered so far came from."""
    return [p for f in folders for p in sorted(Path(f).rglob(f"*{SUFFIX}"))
            if p.resolve() not in _USED]


def _role_template(name: str) -> Path | None:
    role, _, rest = name.partition("/")
    if not rest or role not in role_names():
        return None
    return roles_folder() / role / "templates" / rest


def shipped() -> dict[str, Path]:
    """Every template gpuinfra ships: name -> file (the shared ones, then each role's)."""
    found = {p.relative_to(SHARED).as_posix(): p for p in sorted(SHARED.rglob(f"*{SUFFIX}"))}
    for role in role_names():
        folder = roles_folder() / role / "templates"
        for path in sorted(folder.rglob(f"*{SUFFIX}")):
            found[f"{role}/{path.relative_to(folder).as_posix()}"] = path
    return found


def shared_formats() -> tuple[str, ...]:
    """The first folders of the shared templates (``systemd``): no role may take the name."""
    return tuple(sorted({name.split("/")[0] for name in shipped() if _role_template(name)
                         is None}))


def _checked_name(name: str) -> str:
    parts = name.split("/")
    if not name.endswith(SUFFIX) or name.startswith("/") or any(p in ("", ".", "..")
                                                                 for p in parts):
        raise TemplateProblem(f"not a template name: {name!r} (a relative path ending in "
                              f"{SUFFIX}, without '..')")
    return name


class _Loader(BaseLoader):
    """The search order of the module docstring."""

    def __init__(self, site: tuple[Path, ...]) -> None:
        self.site = site

    def find(self, name: str) -> tuple[Path, bool]:
        _checked_name(name)
        for folder in self.site:
            path = folder / name
            if path.is_file():
                return path, True
        own = _role_template(name)
        if own is not None and own.is_file():
            return own, False
        path = SHARED / name
        if path.is_file():
            return path, False
        raise TemplateNotFound(name)

    def get_source(self, environment: Environment, template: str
                   ) -> tuple[str, str, Callable[[], bool]]:
        path, _ = self.find(template)
        try:
            source = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise TemplateProblem(f"{path}: cannot be read as text ({exc})") from None
        mtime = path.stat().st_mtime

        def uptodate() -> bool:  # the same file still wins the search, unchanged
            try:
                return self.find(template)[0] == path and path.stat().st_mtime == mtime
            except (TemplateNotFound, OSError):
                return False

        return source, str(path), uptodate


def _no_line_breaks(value: Any) -> Any:
    """Every ``{{ value }}``: a line break would add lines to a line-oriented file."""
    if isinstance(value, str) and not isinstance(value, Block) and (
            "\n" in value or "\r" in value):
        raise TemplateProblem(f"the value {value!r} has a line break: it would add lines "
                              "(directives, commands) to the file")
    return value


def _autoescape(name: str | None) -> bool:
    return bool(name) and name.endswith((".xml.j2", ".html.j2"))  # type: ignore[union-attr]


@cache
def _environment(site: tuple[Path, ...]) -> Environment:
    env = Environment(loader=_Loader(site), undefined=StrictUndefined, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True, autoescape=_autoescape,
                      finalize=_no_line_breaks)
    env.globals["header"] = header("#").rstrip("\n")  # every template ends the line itself
    env.globals["header_for"] = lambda comment: header(comment).rstrip("\n")
    env.filters["sh"] = lambda value: shlex.quote(str(value))
    return env


# ----------------------------------------------------------------------------- rendering

def render(name: str, /, **context: Any) -> Rendered:
    """The text of template ``name`` with ``context`` (see the module docstring for where it
    is found); raises :class:`TemplateProblem` naming the template's file and line. Within a
    deploy, the same template with the same values is rendered once (once.py)."""
    return once.remembered(once.key(name, context, _SITE), lambda: _render(name, context),
                           lambda made: _stamp(name, made))


def _stamp(name: str, made: Rendered) -> tuple[Any, ...]:
    """What a rendered text was made from, as on disk now: its template file (size, inode,
    modification time) and, in each site folder, whether a template of that name is there
    (a new one would win). Raises OSError when the file is gone."""
    found = os.stat(made.origin)
    folders = _SITE if _SITE is not None else (Path(os.getcwd()) / SITE_FOLDER,)
    return (found.st_size, found.st_ino, found.st_mtime_ns,
            tuple(os.path.isfile(os.path.join(folder, name)) for folder in folders))


def _render(name: str, context: dict[str, Any]) -> Rendered:
    site = current_site_folders()
    env = _environment(site)
    try:
        path, override = _Loader(site).find(name)
    except TemplateNotFound as exc:
        raise TemplateProblem(_not_found(str(exc), name)) from None
    try:
        text = env.get_template(name).render(**context)
    except TemplateNotFound as exc:  # a template it includes
        raise TemplateProblem(_not_found(str(exc), name)) from None
    except TemplateSyntaxError as exc:
        raise TemplateProblem(f"{exc.filename or name}, line {exc.lineno}: {exc.message}"
                              f"{_fix(override)}") from None
    except (TemplateError, TemplateProblem) as exc:
        where = _line_of(exc) or ""
        raise TemplateProblem(f"{path}{where}: {exc}{_fix(override)}") from None
    if override:
        _USED.add(path.resolve())
    return Rendered(text, name, path, override)


def text(file: FileText) -> Rendered:
    """The text of a file the library described (:class:`gpuinfra.text.FileText`)."""
    return render(file.template, **file.context)


def role_file(role: str, target: str, /, **context: Any) -> Rendered:
    """The text of ``target`` (``/etc/slurm/slurm.conf``) from the role's template
    ``<role>/<target>.j2``."""
    return render(f"{role}/{target.lstrip('/')}{SUFFIX}", **context)


def _line_of(exc: BaseException) -> str | None:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(SUFFIX):
            line = tb.tb_lineno
        tb = tb.tb_next
    return f", line {line}" if line else None


def _fix(override: bool) -> str:
    return (" (the site's own template: fix it, or remove it to use gpuinfra's)" if override
            else "")


def _not_found(missing: str, name: str) -> str:
    close = difflib.get_close_matches(missing, list(shipped()), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"no template {missing}{hint}" + (f" (asked for {name})" if missing != name else "")


# ----------------------------------------------------------------------------- the site's own

def site_problems(folders: Sequence[Path]) -> list[str]:
    """What is wrong with a site's own templates, for the spec gate (before any host is
    touched): a file that overrides no template gpuinfra ships (a typo in its path would
    leave gpuinfra's in use, silently), or one Jinja cannot parse."""
    known = shipped()
    problems = []
    env = _environment(tuple(Path(f).resolve() for f in folders))
    for folder in folders:
        for path in sorted(Path(folder).rglob(f"*{SUFFIX}")):
            name = path.relative_to(folder).as_posix()
            if name not in known:
                close = difflib.get_close_matches(name, list(known), n=1)
                problems.append(
                    f"{path}: overrides no template gpuinfra ships, so it would never be used"
                    + (f"; did you mean {folder}/{close[0]}?" if close else
                       "; the templates are listed in templates/README.md"))
                continue
            try:
                env.parse(path.read_text(), name, str(path))
            except TemplateSyntaxError as exc:
                problems.append(f"{path}, line {exc.lineno}: {exc.message} (fix the "
                                "template, or remove it to use gpuinfra's)")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{path}: cannot be read as text ({exc})")
    return problems
