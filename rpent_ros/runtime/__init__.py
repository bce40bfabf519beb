"""The runtime side: nodes that serve arms, grippers, cameras and policies over RuntimeCall, and what reaches them."""
