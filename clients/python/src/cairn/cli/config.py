"""Configuration: the profile file (``cairn login`` writes it) and the state of one
invocation (the global options, and the client made from them)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from .. import errors
from .._client import Cairn
from .toml import toml_dumps, toml_loads


class CommandError(Exception):
    """A problem of the command line itself (configuration, files), shown like an API error."""

    def __init__(self, code: str, detail: str, exit_code: int = 1) -> None:
        super().__init__(detail)
        self.code, self.detail, self.exit_code = code, detail, exit_code


def config_path() -> Path:
    """``$XDG_CONFIG_HOME/cairn/config.toml``, else ``~/.config/cairn/config.toml``."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "cairn" / "config.toml"


def read_profiles(path: Path) -> dict[str, dict[str, str]]:
    """The profiles (top-level tables) of a config file; none when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise CommandError("config", f"cannot read {path}: {e.strerror or e}") from None
    try:
        data = toml_loads()(text)
    except ValueError as e:
        raise CommandError("config", f"{path} is not valid TOML: {e}") from None
    return {
        name: {k: str(v) for k, v in values.items() if not isinstance(v, dict)}
        for name, values in data.items()
        if isinstance(values, dict)
    }


def write_profiles(path: Path, profiles: dict[str, dict[str, str]]) -> None:
    """Writes the config file atomically (a temporary file renamed over it), mode 0600."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(toml_dumps(profiles))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class State:
    """The global options, and the client made from them on first use."""

    def __init__(
        self,
        ctx: click.Context,
        api_key: str | None,
        api_url: str | None,
        profile: str,
        as_json: bool,
        insecure: bool = False,
    ) -> None:
        self.ctx = ctx
        self.api_key, self.api_url, self.profile, self.as_json = api_key, api_url, profile, as_json
        self.insecure = insecure
        self._client: Cairn | None = None

    def settings(self) -> tuple[str | None, str | None]:
        """The key and URL: flags, then the environment, then the profile."""
        key = self.api_key or os.environ.get("CAIRN_API_KEY") or None
        url = self.api_url or os.environ.get("CAIRN_API_URL") or None
        if key is None or url is None:
            saved = read_profiles(config_path()).get(self.profile, {})
            key = key or saved.get("api_key") or None
            url = url or saved.get("api_url") or None
        return key, url

    def allow_insecure(self) -> bool:
        """``--insecure``, or a profile that `cairn login --insecure` wrote."""
        return (
            self.insecure
            or read_profiles(config_path()).get(self.profile, {}).get("allow_insecure") == "true"
        )

    def client(self) -> Cairn:
        if self._client is None:
            key, url = self.settings()
            if not key:
                raise errors.Unauthorized(
                    f"no API key: run `cairn login` (profile {self.profile!r} in {config_path()}), "
                    "set CAIRN_API_KEY, or pass --api-key"
                )
            self._client = Cairn(key, base_url=url, allow_insecure=self.allow_insecure())
            self.ctx.call_on_close(self._client.close)
        return self._client


def state() -> State:
    return click.get_current_context().find_object(State) or _no_state()


def _no_state() -> State:
    raise RuntimeError("cairn commands run under the cairn group")
