"""``python -m memory_inject.cli``: the same as the ``memory-inject`` console script."""

from memory_inject.cli import main

main()
