"""``python -m cairn.cli``: the ``cairn`` command."""

from .app import main

main()
