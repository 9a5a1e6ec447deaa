"""WGSL kernels, shipped as package data (`llmchat.shaders`)."""
