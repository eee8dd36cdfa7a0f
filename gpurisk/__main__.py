from gpurisk.cli import main

main()
