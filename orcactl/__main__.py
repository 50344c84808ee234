from orcactl.main import main

main()
