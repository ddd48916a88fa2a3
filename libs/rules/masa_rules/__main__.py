"""``python -m masa_rules`` is the ``masa-rules`` command."""

import sys

from .cli import main

sys.exit(main())
