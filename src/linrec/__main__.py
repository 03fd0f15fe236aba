"""``python -m linrec`` (and ``torchrun ... -m linrec``) runs the command-line interface."""

import sys

from linrec.cli import main

sys.exit(main())
