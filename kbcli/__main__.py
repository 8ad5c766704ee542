import sys

from kbcli.main import main

sys.exit(main())
