"""FlowCapsules: capsule encoder, implicit mask decoder, depth-ordered layering."""
