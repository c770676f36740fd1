from scalescope.cli import main

main()
