#include <weft/plugin.h>
/* placeholder: the HTTP task is being written */
int weft_plugin_init(const weft_host *host)
{
    WEFT_PLUGIN_BEGIN(host);
    return 0;
}
WEFT_PLUGIN_ENTRY(http)
