# A tool that fails raises ToolError in the script, with the error's text.
try:
    tools.peer_fail()
    message = "no error?"
except ToolError as exc:
    message = str(exc)
print("the tool said:", message)
message
