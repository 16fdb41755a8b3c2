from servers.gateway.app import main

main()
