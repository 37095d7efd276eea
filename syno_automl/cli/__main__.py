"""``python -m syno_automl.cli``: the same as the ``syno-automl`` command."""
import sys

from syno_automl.cli.app import main

sys.exit(main())
