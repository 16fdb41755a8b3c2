from servers.container.server import main

main()
