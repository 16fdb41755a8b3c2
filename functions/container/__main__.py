from functions.container.server import main

main()
