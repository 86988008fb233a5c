// The host side of the MCP Apps bridge, bundled by host.mjs (esbuild) into
// the test host page as the global `ExtApps`.
export { AppBridge, PostMessageTransport, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";
