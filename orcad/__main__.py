from orcad.main import main

main()
