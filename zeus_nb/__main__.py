import sys

from zeus_nb.cli import main

sys.exit(main())
