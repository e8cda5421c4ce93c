"""``cairn mcp config``: the configuration that connects an MCP client (Claude Code,
Claude Desktop, Cursor, VS Code) to Cairn's MCP server, for the current profile."""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from .._transport import DEFAULT_BASE_URL
from .config import CommandError, state

CLIENTS = ["claude-code", "claude-desktop", "cursor", "vscode"]

#: Where each client keeps the configuration printed for it.
WHERE = {
    "claude-code": "run this command (add --scope user to use it in every project)",
    "claude-desktop": "merge into claude_desktop_config.json (Settings > Developer > Edit Config)",
    "cursor": "merge into ~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
    "vscode": "merge into .vscode/mcp.json (or run MCP: Open User Configuration)",
}


@click.group()
def mcp() -> None:
    """Cairn's MCP server, for coding agents."""


@mcp.command("config")
@click.option(
    "--client",
    "client",
    type=click.Choice(CLIENTS),
    default="claude-code",
    show_default=True,
    help="The MCP client to configure.",
)
@click.option(
    "--show-key",
    is_flag=True,
    help="Write the profile's key into the configuration (else it is read from CAIRN_API_KEY, "
    "or asked for, when the client starts the server).",
)
def mcp_config(client: str, show_key: bool) -> None:
    """Prints the configuration that connects CLIENT to the MCP server of the current
    profile's API (its URL + /mcp). The key is left out unless --show-key: a key for an
    agent is best one of its own, read-only (cairn keys create --scope ...)."""
    key, url = state().settings()
    if show_key and not key:
        raise CommandError("no_key", "--show-key: no API key in the flags, the environment or the profile")
    endpoint = f"{(url or DEFAULT_BASE_URL).rstrip('/')}/mcp"
    click.echo(f"# {WHERE[client]}", err=True)
    click.echo(render(client, endpoint, key if show_key else None))


def render(client: str, endpoint: str, key: str | None) -> str:
    """`client`'s configuration for the server at `endpoint`, with `key` written in, or a
    reference the client resolves when it starts (an environment variable, or a prompt)."""
    if client == "claude-code":
        secret = key or "$CAIRN_API_KEY"
        header = (
            shlex.quote(f"Authorization: Bearer {secret}") if key else f'"Authorization: Bearer {secret}"'
        )
        return f"claude mcp add --transport http cairn {shlex.quote(endpoint)} --header {header}"
    config: dict[str, Any]
    if client == "claude-desktop":
        # Claude Desktop's configuration file starts local servers; mcp-remote bridges it
        # to a remote one, the header given through the environment (no spaces in args).
        # The file is not interpolated: without the key, a placeholder to replace.
        auth = f"Bearer {key or 'YOUR_CAIRN_API_KEY'}"
        config = {
            "mcpServers": {
                "cairn": {
                    "command": "npx",
                    "args": ["-y", "mcp-remote", endpoint, "--header", "Authorization:${CAIRN_AUTH}"],
                    "env": {"CAIRN_AUTH": auth},
                }
            }
        }
    elif client == "cursor":
        secret = key or "${env:CAIRN_API_KEY}"
        config = {
            "mcpServers": {"cairn": {"url": endpoint, "headers": {"Authorization": f"Bearer {secret}"}}}
        }
    else:
        secret = key or "${input:cairn-api-key}"
        config = {
            "servers": {
                "cairn": {"type": "http", "url": endpoint, "headers": {"Authorization": f"Bearer {secret}"}}
            }
        }
        if not key:
            config["inputs"] = [
                {
                    "type": "promptString",
                    "id": "cairn-api-key",
                    "description": "Cairn API key",
                    "password": True,
                }
            ]
    return json.dumps(config, indent=2)
