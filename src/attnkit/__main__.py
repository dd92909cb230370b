"""``python -m attnkit`` runs the command line."""

import sys

from attnkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
