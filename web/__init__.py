"""The browser runtime and `<llm-chat>` component, shipped as package data (`llmchat.web`)."""
