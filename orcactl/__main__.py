from orcactl.entry import main

main()
