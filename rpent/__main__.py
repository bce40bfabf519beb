from rpent.cli.main import main

raise SystemExit(main())
