from orcad.entry import main

main()
