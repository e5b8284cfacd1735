"""``python -m dashboards [--check]``: write (or check) the generated dashboard JSON."""

import sys

from dashboards.build import main

sys.exit(main())
