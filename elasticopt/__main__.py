"""``python -m elasticopt`` runs the command line."""

import sys

from elasticopt.cli import main

sys.exit(main())
