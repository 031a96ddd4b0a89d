#ifndef WEFT_API_H
#define WEFT_API_H
#endif
