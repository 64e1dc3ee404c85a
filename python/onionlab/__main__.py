import sys

from onionlab.cli import main

sys.exit(main())
