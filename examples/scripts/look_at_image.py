# Look at an image a tool returned inline, and at one embedded as a resource.
import base64

inline = tools.peer_image()["content"][0]
embedded = tools.peer_embedded_image()["content"][0]
for name, block in (("inline", inline), ("embedded", embedded)):
    size = len(base64.b64decode(block["data"]))
    print(name, block["type"], block["mimeType"], size, "bytes")
[inline["mimeType"], embedded["mimeType"]]
