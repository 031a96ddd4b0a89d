/* Fixture: a shared object that exports something, but no weft_plugin_init. */
#include "weft/plugin.h"

WEFT_EXPORT int fx_no_entry_answer(void);

int fx_no_entry_answer(void)
{
    return 42;
}
