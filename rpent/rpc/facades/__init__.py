"""What is served over the transports: the env and VLA facades with their clients (the runtime
Protocols over the wire), the reference VLA server, and the supervisor that runs a facade's server as
a child process. Built on rpent.rpc.transport; the transports never import this room."""
