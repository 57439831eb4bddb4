"""The config file's YAML, read safely: within bounds no real config nears (its size, its
aliases, the values its aliases expand to), and its errors said without quoting a line
(the line may hold the client secret). `settings` makes the settings of what it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from batchval._internal.outcome import SettingsError

# A config is a page of settings: bounds that no real one nears, so that a small file
# cannot take the machine (a YAML alias bomb grows a 518-byte file to billions of nodes).
CONFIG_MOST_BYTES = 1024 * 1024
CONFIG_MOST_ALIASES = 100
CONFIG_MOST_NODES = 100_000  # counted as the aliases expand


def bounded_yaml(path: Path) -> Any:
    """The config file's YAML, read when it is within the bounds above; SettingsError
    (64) when not. Raises OSError and yaml.YAMLError as reading and parsing do."""
    with path.open("rb") as file:
        data = file.read(CONFIG_MOST_BYTES + 1)
    if len(data) > CONFIG_MOST_BYTES:
        raise SettingsError(f"config {path} is over {CONFIG_MOST_BYTES // 1024:,} KiB")
    text = data.decode("utf-8")
    aliases = sum(isinstance(t, yaml.AliasToken) for t in yaml.scan(text, Loader=yaml.SafeLoader))
    if aliases > CONFIG_MOST_ALIASES:
        raise SettingsError(
            f"config {path} has {aliases} YAML aliases (*name), more than "
            f"{CONFIG_MOST_ALIASES}: write the settings out"
        )
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None and expanded(node, {}) > CONFIG_MOST_NODES:
        raise SettingsError(
            f"config {path} expands to more than {CONFIG_MOST_NODES:,} values through its "
            "YAML aliases: write the settings out"
        )
    return yaml.safe_load(text)


def expanded(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many nodes `node` stands for once every alias is expanded (an alias is the
    node it names, shared: each is counted once, by its id, then multiplied)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = 1  # a node that holds itself (a recursive alias) counts once
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(expanded(child, sizes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(expanded(k, sizes) + expanded(v, sizes) for k, v in node.value)
    sizes[id(node)] = min(size, CONFIG_MOST_NODES + 1)
    return sizes[id(node)]


def read_config_file(path: Path) -> Any:
    """The YAML of the config file at `path` (None for an empty one); SettingsError (64)
    for a file that cannot be read, is not UTF-8, is not YAML or is out of bounds."""
    try:
        return bounded_yaml(path)
    except UnicodeDecodeError:
        raise SettingsError(f"config {path} is not UTF-8 text: not a config file?") from None
    except OSError as exc:
        raise SettingsError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        # Where, and what yaml calls the problem; never `str(exc)`, which quotes the
        # line, and the line may be the one holding the client secret.
        mark = getattr(exc, "problem_mark", None)
        where = "" if mark is None else f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None)
        said = f" ({problem})" if isinstance(problem, str) else ""
        raise SettingsError(f"config {path} is not valid YAML{where}{said}") from None
