# Read an MCP embedded resource: the script gets the text its contents make, never its uri.
result = call_tool("peer.embedded_text", {})
block = result["content"][0]
print("block type:", block["type"])
block["text"]
