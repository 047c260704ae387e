import sys

from exactgrade.cli import main

sys.exit(main())
