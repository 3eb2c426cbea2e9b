from bench.sim_bench import main

raise SystemExit(main())
