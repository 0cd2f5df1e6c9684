# A standard MCP server built on the SDK: an embedded page, and a link read through the server.
page = tools.docs_page(name="install")["content"][0]["text"]
print(page.splitlines()[0])
link = tools.docs_attachment()["content"][1]
path = fetch(link)
[page.splitlines()[0], read_text(path)]
