"""Configuration: which rules apply and which findings are accepted.

The keys are buf's (`buf.yaml` version v2, section `breaking:`): `use` (rules
or categories), `except` (rules or categories taken out of `use`), `ignore`
(files or folders whose findings are accepted), `ignore_only` (a rule or
category, and the files or folders where its findings are accepted). They
are read from a `buf.yaml` when one is present, or from the table
`[tool.llmgw-wire.compat]` of a `pyproject.toml` for projects without buf.
"""

from __future__ import annotations

import importlib
import os
import re
import stat
from pathlib import Path
from typing import Any

import attrs

from llmgw_wire.compat._files import MAX_CONFIG_BYTES, read_regular_file, safe_relative
from llmgw_wire.compat._model import CompatError, Finding
from llmgw_wire.compat._rules import CATEGORIES, RULES

__all__ = ["Config", "find_config", "load_config"]

_KEYS = ("use", "except", "ignore", "ignore_only")
_WORD = re.compile(r"[A-Z][A-Z0-9_]{0,63}|[a-z][a-z0-9]{0,15}")
# YAML nested deeper than this is no configuration (and would exhaust the stack).
_MAX_DEPTH = 32


def _kind(value: object) -> str:  # noqa: PLR0911 - one per type
    """What a configuration value is, in a few words: never the value itself.

    A value of the wrong type may be anything, secrets and megabytes included,
    so messages name its type; a string is shown only when it is a short word,
    which is what a misspelt rule or version is (secrets are longer).
    """
    if isinstance(value, str):
        if _WORD.fullmatch(value):
            return repr(value)
        return f"a string of {len(value)} characters"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} keys"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if value is None:
        return "nothing (null)"
    return f"a value of type {type(value).__name__}"


def _names(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise CompatError(f"{where}: Expected a list of strings, got {_kind(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise CompatError(f"{where}[{i}]: Expected a string, got {_kind(item)}")
    return tuple(value)


def _paths(value: object, where: str) -> tuple[str, ...]:
    # Paths of a configuration are relative to its folder and stay inside it.
    names = _names(value, where)
    for i, name in enumerate(names):
        safe_relative(name, f"{where}[{i}]")
    return names


def _expand(names: tuple[str, ...], where: str) -> set[str]:
    rules: set[str] = set()
    for name in names:
        if name in CATEGORIES:
            rules |= {rule for rule, categories in RULES.items() if name in categories}
        elif name in RULES:
            rules.add(name)
        else:
            raise CompatError(
                f"{where}: Expected a rule or a category of {', '.join(CATEGORIES)}, got "
                f"{_kind(name)} (the checker applies only buf's WIRE and WIRE_JSON rules)"
            )
    return rules


def path_under(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether `path` is one of `prefixes` or inside one, as buf matches paths ("." is all)."""
    return any(
        prefix in (".", "") or path == prefix or path.startswith(prefix.rstrip("/") + "/")
        for prefix in prefixes
    )


@attrs.frozen
class Config:
    """Which rules apply and which findings are accepted.

    Paths are relative to the proto root (the folder whose files are named
    `llmgw/v1/node.proto` and so on), as findings name files.

    Attributes:
        use: rules or categories to apply; empty means the category passed to `check`.
        except_: rules or categories not to apply (buf's `except`).
        ignore: files or folders whose findings are accepted.
        ignore_only: for a rule or category, the files or folders where its
            findings are accepted.
        source: where the configuration was read, for messages; "" if built in code.
    """

    use: tuple[str, ...] = ()
    except_: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    ignore_only: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    source: str = ""

    def __attrs_post_init__(self) -> None:
        where = self.source or "the configuration"
        _expand(self.use, f"{where}: use")
        _expand(self.except_, f"{where}: except")
        for name in self.ignore_only:
            _expand((name,), f"{where}: ignore_only")

    def rules(self, category: str) -> list[str]:
        """The names of the rules to apply, sorted, `category` standing in for an empty `use`."""
        where = self.source or "the configuration"
        used = _expand(self.use or (category,), f"{where}: use")
        return sorted(used - _expand(self.except_, f"{where}: except"))

    def ignores(self, finding: Finding) -> bool:
        """Whether `finding` is accepted by `ignore` or `ignore_only`."""
        if path_under(finding.path, self.ignore):
            return True
        return any(
            finding.rule in _expand((name,), "ignore_only") and path_under(finding.path, paths)
            for name, paths in self.ignore_only.items()
        )


def _relative(paths: tuple[str, ...], base: Path, root: Path | None) -> tuple[str, ...]:
    """Paths written relative to `base` (the config's folder), made relative to `root`."""
    if root is None:
        return paths
    out = []
    for path in paths:
        full = Path(os.path.normpath(base / path))
        try:
            out.append(full.relative_to(root.resolve()).as_posix() or ".")
        except ValueError:
            out.append(path)  # outside the proto root: kept as written
    return tuple(out)


def _from_table(table: object, where: str, base: Path, root: Path | None) -> Config:
    if not isinstance(table, dict):
        raise CompatError(f"{where}: Expected a table of {', '.join(_KEYS)}, got {_kind(table)}")
    unknown = sorted((str(key) for key in set(table) - set(_KEYS)), key=str)
    if unknown:
        raise CompatError(
            f"{where}: Expected keys among {', '.join(_KEYS)}, got {_kind(unknown[0])}"
        )
    only = table.get("ignore_only", {})
    if not isinstance(only, dict):
        raise CompatError(f"{where}: ignore_only: Expected a table of lists, got {_kind(only)}")
    for name in only:
        if not isinstance(name, str):
            raise CompatError(f"{where}: ignore_only: Expected rule names, got {_kind(name)}")
    return Config(
        use=_names(table.get("use", []), f"{where}: use"),
        except_=_names(table.get("except", []), f"{where}: except"),
        ignore=_relative(_paths(table.get("ignore", []), f"{where}: ignore"), base, root),
        ignore_only={
            name: _relative(_paths(paths, f"{where}: ignore_only: {name}"), base, root)
            for name, paths in only.items()
        },
        source=where,
    )


def load_config(
    path: str | os.PathLike[str], proto_root: str | os.PathLike[str] | None = None
) -> Config:
    """Read the checker's configuration from a `buf.yaml` (v2) or a `pyproject.toml`.

    Args:
        path: the file. A `buf.yaml` (v2, or v1) is read for its `breaking:`
            section, or that of the module in `modules:` whose `path` is the
            proto root;
            a `pyproject.toml` for its `[tool.llmgw-wire.compat]` table.
        proto_root: the folder of the schema, so that `ignore` paths
            (relative to the file's folder) are matched against file names.

    Raises:
        CompatError: the file cannot be read, is not v2 or v1, or has a key or a
            rule the checker does not know.
    """
    file = Path(path)
    where = os.fspath(path)
    root = Path(proto_root) if proto_root is not None else None
    text = read_regular_file(file, MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    if file.suffix == ".toml":
        table: object = _toml(text, where)
        for key in ("tool", "llmgw-wire", "compat"):
            if not isinstance(table, dict):
                break
            table = table.get(key, {})
            if not isinstance(table, dict):
                raise CompatError(
                    f"{where}: [{_TOML_PATH[key]}]: Expected a table, got {_kind(table)}"
                )
        return _from_table(table, f"{where} [tool.llmgw-wire.compat]", file.parent, root)
    data = _yaml(text, where)
    # v1's breaking: section has the same keys, its paths relative to the
    # module, which is the file's folder there.
    if not isinstance(data, dict) or data.get("version") not in ("v1", "v2"):
        got = data.get("version") if isinstance(data, dict) else data
        raise CompatError(
            f"{where}: Expected a buf.yaml of version v2 or v1, got version {_kind(got)}"
        )
    section = data.get("breaking", {})
    modules = data.get("modules", None) or []
    if not isinstance(modules, list):
        raise CompatError(f"{where}: modules: Expected a list of modules, got {_kind(modules)}")
    for i, module in enumerate(modules):
        if not isinstance(module, dict):
            raise CompatError(f"{where}: modules[{i}]: Expected a mapping, got {_kind(module)}")
        module_path = module.get("path", ".")
        if not isinstance(module_path, str):
            raise CompatError(
                f"{where}: modules[{i}]: path: Expected a string, got {_kind(module_path)}"
            )
        safe_relative(module_path, f"{where}: modules[{i}]: path")
        module_dir = file.parent / module_path
        if root is not None and module_dir.resolve() == root.resolve() and "breaking" in module:
            section = module["breaking"]
    if not isinstance(section, dict):
        raise CompatError(f"{where}: breaking: Expected a mapping, got {_kind(section)}")
    # buf's other breaking keys change nothing the checker does.
    section = {k: v for k, v in section.items() if k not in ("ignore_unstable_packages",)}
    return _from_table(section, f"{where} breaking", file.parent, root)


_TOML_PATH = {"tool": "tool", "llmgw-wire": "tool.llmgw-wire", "compat": "tool.llmgw-wire.compat"}


def _toml(text: str, where: str) -> dict[str, object]:
    # tomllib is Python 3.11's; on 3.10 its backport tomli, if installed.
    try:
        tomllib = importlib.import_module("tomllib")
    except ImportError:
        try:
            tomllib = importlib.import_module("tomli")
        except ImportError:
            raise CompatError(
                f"reading {where} on Python 3.10 needs tomli: pip install tomli"
            ) from None
    try:
        data: dict[str, object] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CompatError(f"{where} is not valid TOML: {exc}") from None
    except RecursionError:
        raise CompatError(f"{where} is not a configuration: nested too deeply") from None
    return data


def _yaml(text: str, where: str) -> object:
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        raise CompatError(
            f"reading {where} needs PyYAML; install the `schema` extra: "
            "pip install 'llmgw-wire[schema]'"
        ) from None
    try:
        return yaml.load(text, Loader=_loader(yaml))
    except yaml.YAMLError as exc:
        # PyYAML's message quotes the offending line: one line of it, bounded.
        first = " ".join(str(exc).split())[:200]
        raise CompatError(f"{where} is not valid YAML: {first}") from None
    except RecursionError:
        raise CompatError(f"{where} is not a configuration: nested too deeply") from None


def _loader(yaml: Any) -> type:  # the module `yaml`, untyped
    """PyYAML's SafeLoader without aliases, and with a bound on nesting.

    Aliases let a few hundred bytes expand into gigabytes ("billion laughs");
    a configuration has no use for them, so they are refused as they are met.
    """

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        depth = 0

        def compose_node(self, parent: object, index: object) -> object:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, "aliases (*name) are not allowed here", event.start_mark
                )
            self.depth += 1
            try:
                if self.depth > _MAX_DEPTH:
                    raise yaml.composer.ComposerError(
                        None, None, f"nested deeper than {_MAX_DEPTH}", self.peek_event().start_mark
                    )
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


def find_config(start: str | os.PathLike[str]) -> Path | None:
    """The `buf.yaml`, or `pyproject.toml` with a `[tool.llmgw-wire.compat]` table, nearest `start`.

    It looks in `start` and then in each folder above it, up to the top of
    the git repository (the first folder with a `.git`) or the file system.
    Outside a repository that climbs into folders others share (`/tmp`,
    `/home`), so there, as git's `safe.directory` does, a file found is
    obeyed only when it is the user's own (or root's) and no other user may
    write it: a `buf.yaml` someone else left in `/tmp` would otherwise
    decide what counts as breaking. Inside a repository, its files are the
    project's, whoever owns the checkout (a container's root, say). A name
    given to `load_config` is not searched for, and not checked.

    Raises:
        CompatError: outside a repository, the nearest file is someone
            else's, or any user may write it.
    """
    folder = Path(start).resolve()
    if not folder.is_dir():
        folder = folder.parent
    folders = [folder, *folder.parents]
    top = next((i for i, candidate in enumerate(folders) if (candidate / ".git").exists()), None)
    in_repository = top is not None
    for candidate in folders[: top + 1] if top is not None else folders:
        buf = candidate / "buf.yaml"
        pyproject = candidate / "pyproject.toml"
        if buf.is_file():
            found = buf
        elif pyproject.is_file() and b"[tool.llmgw-wire.compat]" in read_regular_file(
            pyproject, MAX_CONFIG_BYTES
        ):
            found = pyproject
        else:
            continue
        return found if in_repository else _trusted(found)
    return None


def _trusted(found: Path) -> Path:
    """`found`, if the user or root owns it (and the link to it) and others cannot write it."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:
        return found  # no owners to compare (not POSIX)
    for info in (found.lstat(), found.stat()):
        if info.st_uid not in (geteuid(), 0):
            why = f"is owned by another user (uid {info.st_uid})"
        elif info.st_mode & stat.S_IWOTH and not stat.S_ISLNK(info.st_mode):
            why = "may be written by any user"
        else:
            continue
        raise CompatError(
            f"{found} {why}: a configuration found by searching above the schema is "
            "obeyed only when it is yours (or root's) and no one else may write it; "
            "name the one to use with --config"
        )
    return found
