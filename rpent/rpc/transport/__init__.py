"""How RPC calls travel: endpoints, the JSON codec and pickle frames, the http and socket clients and
servers (and openpi's websocket client for policies), server limits, and `serve` / `RpcClient`, which
pick a transport by the endpoint's protocol. Servers dispatch into an rpent.rpc.facade.RpcFacade;
no facade (env, VLA) is defined here, and nothing here imports rpent.rpc.facades."""
